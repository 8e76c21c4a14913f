//! Running one command as a host process in its own process group.
//!
//! The group is what makes stopping reliable: `sh -c 'a | b &'` spawns
//! grandchildren that killing the shell alone would leave behind, so every
//! stop (timeout, cancel, dropped future) is a `killpg`.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use roder_api::remote_runner::{RunnerCommandId, RunnerCommandResult};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::running::RunningCommands;

/// How long output may keep arriving after the group leader exited. A
/// background process (`server &`) inherits stdout and may hold it open for
/// ever; waiting for EOF would hang the command, so the wait is bounded and
/// the result notes that output may be incomplete.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(1000);

/// Captured bytes kept per stream; the rest is read and dropped so the
/// process never blocks on a full pipe, and memory stays bounded.
const MAX_CAPTURE_BYTES: usize = 16 * 1024 * 1024;

/// A command ready to spawn: paths already resolved inside the root.
#[derive(Debug, Clone)]
pub(crate) struct PreparedCommand {
    pub(crate) command_id: RunnerCommandId,
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    pub(crate) cwd: PathBuf,
    /// Inherited variables to drop before `env` is applied (the git-worktree
    /// runner drops `GIT_DIR` and friends so `git` finds the checkout).
    pub(crate) env_remove: Vec<String>,
    /// Config env first, then request env, so the request wins.
    pub(crate) env: Vec<(String, String)>,
    pub(crate) timeout: Option<Duration>,
}

enum Ending {
    Exited(ExitStatus),
    /// Killed at the deadline; the status is just a signal death.
    TimedOut,
}

/// Spawns the command and waits for it, honouring timeout and cancellation.
pub(crate) async fn run(
    command: PreparedCommand,
    running: &RunningCommands,
) -> anyhow::Result<RunnerCommandResult> {
    let mut guard = running.reserve(&command.command_id)?;
    let mut process = tokio::process::Command::new(&command.program);
    for key in &command.env_remove {
        process.env_remove(key);
    }
    let mut child = process
        .args(&command.args)
        .current_dir(&command.cwd)
        .envs(command.env.iter().map(|(key, value)| (key, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "failed to start `{}` in `{}`",
                command.program,
                command.cwd.display()
            )
        })?;
    let pid = child
        .id()
        .context("spawned process has no pid (already reaped)")?;
    let pgid = i32::try_from(pid).context("process id does not fit a pid_t")?;
    guard.attach(pgid);

    let mut stdout_capture = Capture::spawn(child.stdout.take());
    let mut stderr_capture = Capture::spawn(child.stderr.take());

    let ending = match command.timeout {
        None => Ending::Exited(child.wait().await?),
        Some(limit) => match tokio::time::timeout(limit, child.wait()).await {
            Ok(status) => Ending::Exited(status?),
            Err(_elapsed) => {
                guard.kill();
                child.wait().await?;
                Ending::TimedOut
            }
        },
    };
    guard.disarm();
    let cancelled = guard.was_cancelled();

    let deadline = Instant::now() + DRAIN_TIMEOUT;
    let (stdout, stderr) = tokio::join!(
        stdout_capture.finish(deadline),
        stderr_capture.finish(deadline)
    );
    drop(guard);

    let mut notes = Vec::new();
    let exit_code = match ending {
        Ending::Exited(status) => status.code(),
        Ending::TimedOut => {
            let limit = command.timeout.unwrap_or_default().as_millis();
            notes.push(format!("command timed out after {limit} ms"));
            None
        }
    };
    if cancelled {
        notes.push("command cancelled".to_string());
    }
    if !stdout.complete || !stderr.complete {
        notes.push(
            "output may be incomplete: a background process kept stdout/stderr open".to_string(),
        );
    }
    Ok(RunnerCommandResult {
        command_id: command.command_id,
        exit_code,
        stdout: stdout.into_text(None),
        stderr: stderr.into_text(Some(&notes)),
    })
}

/// Bytes read from one stream.
#[derive(Debug, Default)]
struct Captured {
    bytes: Vec<u8>,
    /// Bytes beyond `MAX_CAPTURE_BYTES` that were read and dropped.
    dropped: usize,
    /// The stream reached EOF (rather than being cut off after the drain).
    complete: bool,
}

impl Captured {
    fn into_text(self, notes: Option<&[String]>) -> String {
        let mut text = match String::from_utf8(self.bytes) {
            Ok(text) => text,
            Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
        };
        let mut lines = Vec::new();
        if self.dropped > 0 {
            lines.push(format!(
                "[output truncated: {} more bytes not kept]",
                self.dropped
            ));
        }
        lines.extend(notes.unwrap_or_default().iter().cloned());
        for line in lines {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    }
}

/// A task reading one pipe to EOF, stoppable after the drain deadline.
struct Capture {
    task: Option<JoinHandle<Captured>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Capture {
    fn spawn<R: AsyncRead + Unpin + Send + 'static>(reader: Option<R>) -> Self {
        let Some(mut reader) = reader else {
            return Self {
                task: None,
                stop: None,
            };
        };
        let (stop, mut stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let mut captured = Captured::default();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                tokio::select! {
                    biased;
                    read = reader.read(&mut chunk) => match read {
                        Ok(0) | Err(_) => {
                            captured.complete = true;
                            return captured;
                        }
                        Ok(n) => {
                            let room = MAX_CAPTURE_BYTES.saturating_sub(captured.bytes.len());
                            let kept = n.min(room);
                            captured.bytes.extend_from_slice(&chunk[..kept]);
                            captured.dropped += n - kept;
                        }
                    },
                    _ = &mut stopped => return captured,
                }
            }
        });
        Self {
            task: Some(task),
            stop: Some(stop),
        }
    }

    /// What was read, waiting for EOF until `deadline` at most.
    async fn finish(&mut self, deadline: Instant) -> Captured {
        let Some(mut task) = self.task.take() else {
            return Captured {
                complete: true,
                ..Captured::default()
            };
        };
        if let Ok(joined) = tokio::time::timeout_at(deadline, &mut task).await {
            return joined.unwrap_or_default();
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        task.await.unwrap_or_default()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_go_on_their_own_lines() {
        let captured = Captured {
            bytes: b"partial".to_vec(),
            dropped: 3,
            complete: true,
        };
        assert_eq!(
            captured.into_text(Some(&["note".to_string()])),
            "partial\n[output truncated: 3 more bytes not kept]\nnote\n"
        );
        assert_eq!(Captured::default().into_text(None), "");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_refused() {
        let captured = Captured {
            bytes: vec![b'a', 0xff, b'b'],
            ..Captured::default()
        };
        assert_eq!(captured.into_text(None), "a\u{fffd}b");
    }

    #[tokio::test]
    async fn capture_stops_at_the_deadline_when_the_pipe_stays_open() {
        let (writer, reader) = tokio::io::duplex(64);
        let mut capture = Capture::spawn(Some(reader));
        let captured = capture.finish(Instant::now()).await;
        assert!(!captured.complete);
        drop(writer);
    }

    #[tokio::test]
    async fn capture_reads_to_eof() {
        let (mut writer, reader) = tokio::io::duplex(64);
        let mut capture = Capture::spawn(Some(reader));
        tokio::io::AsyncWriteExt::write_all(&mut writer, b"hello")
            .await
            .unwrap();
        drop(writer);
        let captured = capture
            .finish(Instant::now() + Duration::from_secs(10))
            .await;
        assert!(captured.complete);
        assert_eq!(captured.bytes, b"hello");
    }
}
