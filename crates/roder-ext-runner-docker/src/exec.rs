//! Running one command in a container through the exec API, with timeout,
//! cancellation and kill.
//!
//! Docker has no call to signal an exec'd process, so every command carries
//! a unique marker in its environment (`RODER_COMMAND_MARK=<uuid>`). The
//! environment is inherited by everything the command starts, including
//! background children, `setsid` daemons and re-parented orphans, so killing
//! "every process whose environment holds the marker" (a second exec that
//! scans `/proc/*/environ`) stops the whole tree, where a process-group kill
//! would miss children that left the group. The command itself runs as
//! given (no shell wrapper), so its argv and exit status are its own.

use std::time::Duration;

use anyhow::bail;
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures::{Stream, StreamExt};
use roder_api::remote_runner::RunnerCommandResult;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::client::{message_of, status_of};

/// The environment variable that marks a command's processes.
pub const MARKER_VAR: &str = "RODER_COMMAND_MARK";

/// Most bytes kept of each of stdout and stderr.
pub const MAX_STREAM_BYTES: usize = 16 << 20;

/// How long output is still collected after a kill: enough for the stream to
/// close once the processes are gone.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(3);

/// How long the kill exec may take.
const KILL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the daemon may take to report an exit once the output closed.
const EXIT_REPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Kills every process whose environment holds the marker `$1`, repeating
/// until a scan finds none (a dying tree can fork once more). Each round
/// stops the whole set before killing it: killed one by one (the glob is
/// not in pid order), a parent could run on for a moment after its child
/// died, e.g. to print or start something else. `environ` is NUL-separated,
/// so entries are matched whole with `grep -z`, or through `tr` where grep
/// lacks `-z`.
const KILL_SCRIPT: &str = r#"m="$1"; n=0
if printf 'a\0b' | grep -qzxF b 2>/dev/null; then
  scan() { grep -lzxF "$m" /proc/[0-9]*/environ 2>/dev/null; }
else
  scan() {
    for f in /proc/[0-9]*/environ; do
      tr '\0' '\n' < "$f" 2>/dev/null | grep -qxF "$m" && echo "$f"
    done
  }
fi
while [ "$n" -lt 50 ]; do
  pids=
  for f in $(scan); do
    p=${f#/proc/}; pids="$pids ${p%/environ}"
  done
  [ -z "$pids" ] && exit 0
  kill -STOP $pids 2>/dev/null
  kill -9 $pids 2>/dev/null
  n=$((n+1))
done
exit 1"#;

/// One command to run.
pub struct ExecRequest {
    pub command_id: String,
    pub argv: Vec<String>,
    /// Absolute container path.
    pub cwd: String,
    /// `NAME=value` pairs added to the container's environment.
    pub env: Vec<String>,
    pub timeout: Option<Duration>,
}

/// How the wait for a command ended.
enum End {
    Finished,
    TimedOut(Duration),
    Cancelled,
}

/// Runs `request` in `container`; `cancel` stops it early.
pub async fn run(
    docker: &Docker,
    container: &str,
    request: ExecRequest,
    cancel: &CancellationToken,
) -> anyhow::Result<RunnerCommandResult> {
    let mark = format!("{MARKER_VAR}={}", uuid::Uuid::new_v4().simple());
    let mut env = request.env;
    env.push(mark.clone());
    let program = request.argv.first().cloned().unwrap_or_default();
    let options = CreateExecOptions {
        attach_stdin: Some(false),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        cmd: Some(request.argv),
        env: Some(env),
        working_dir: Some(request.cwd.clone()),
        ..Default::default()
    };
    let created = docker
        .create_exec(container, options)
        .await
        .map_err(|error| exec_error(container, &program, &error))?;
    let mut guard = KillOnDrop {
        docker: docker.clone(),
        container: container.to_string(),
        mark: Some(mark.clone()),
    };
    let started = docker
        .start_exec(
            &created.id,
            Some(StartExecOptions {
                detach: false,
                tty: false,
                output_capacity: None,
            }),
        )
        .await
        .map_err(|error| exec_error(container, &program, &error))?;
    let StartExecResults::Attached { mut output, input } = started else {
        bail!("the Docker daemon started `{program}` detached; expected attached output");
    };
    drop(input);

    let mut capture = Capture::default();
    let end = wait(&mut output, &mut capture, request.timeout, cancel).await?;
    let note = match end {
        End::Finished => {
            guard.disarm();
            let exit_code = exit_code(docker, &created.id).await?;
            if let Some(reason) = capture.start_failure(exit_code) {
                bail!("failed to start `{program}` in `{}`: {reason}", request.cwd);
            }
            return Ok(capture.into_result(request.command_id, exit_code, None));
        }
        End::TimedOut(after) => format!("command timed out after {} ms", after.as_millis()),
        End::Cancelled => "command cancelled".to_string(),
    };
    kill(docker, container, &mark).await;
    let drained = drain(&mut output, &mut capture).await;
    if !drained {
        // Something started between the scan and its kill; once more.
        kill(docker, container, &mark).await;
        drain(&mut output, &mut capture).await;
    }
    guard.disarm();
    Ok(capture.into_result(request.command_id, None, Some(note)))
}

/// Reads output until the stream ends, the timeout passes or `cancel` fires.
async fn wait<S>(
    output: &mut S,
    capture: &mut Capture,
    timeout: Option<Duration>,
    cancel: &CancellationToken,
) -> anyhow::Result<End>
where
    S: Stream<Item = Result<LogOutput, bollard::errors::Error>> + Unpin,
{
    let limit = timeout.unwrap_or(Duration::from_secs(u64::from(u32::MAX)));
    let deadline = tokio::time::sleep_until(Instant::now() + limit);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(End::Cancelled),
            _ = &mut deadline, if timeout.is_some() => return Ok(End::TimedOut(limit)),
            item = output.next() => match item {
                Some(Ok(chunk)) => capture.push(chunk),
                Some(Err(error)) => bail!("reading the command's output failed: {}", message_of(&error)),
                None => return Ok(End::Finished),
            },
        }
    }
}

/// Collects what is left of the output after a kill; false if the stream
/// is still open after [`DRAIN_AFTER_KILL`].
async fn drain<S>(output: &mut S, capture: &mut Capture) -> bool
where
    S: Stream<Item = Result<LogOutput, bollard::errors::Error>> + Unpin,
{
    let collect = async {
        while let Some(Ok(chunk)) = output.next().await {
            capture.push(chunk);
        }
    };
    tokio::time::timeout(DRAIN_AFTER_KILL, collect)
        .await
        .is_ok()
}

/// The exit code of a finished exec. The daemon may report the exit a
/// moment after the output closes and offers no event to wait on here, so
/// this polls its state, bounded.
async fn exit_code(docker: &Docker, exec_id: &str) -> anyhow::Result<Option<i32>> {
    let give_up = Instant::now() + EXIT_REPORT_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        let inspect = docker.inspect_exec(exec_id).await.map_err(|error| {
            anyhow::anyhow!(
                "cannot read the exit status of the command: {}",
                message_of(&error)
            )
        })?;
        if inspect.running != Some(true) {
            return Ok(inspect
                .exit_code
                .map(|code| i32::try_from(code).unwrap_or(i32::MAX)));
        }
        if Instant::now() >= give_up {
            bail!(
                "the command's output closed but the daemon still reports it running after {} s",
                EXIT_REPORT_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Kills every process carrying `mark` in `container`. Failures are logged:
/// there is nobody left to report them to (a timed-out command's result is
/// "timed out" either way).
pub async fn kill(docker: &Docker, container: &str, mark: &str) {
    let marker_value = mark.to_string();
    let attempt = async {
        let options = CreateExecOptions {
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            cmd: Some(vec![
                "/bin/sh".to_string(),
                "-c".to_string(),
                KILL_SCRIPT.to_string(),
                "roder-kill".to_string(),
                marker_value,
            ]),
            ..Default::default()
        };
        let created = docker.create_exec(container, options).await?;
        if let StartExecResults::Attached { mut output, .. } =
            docker.start_exec(&created.id, None).await?
        {
            while output.next().await.is_some() {}
        }
        Ok::<_, bollard::errors::Error>(())
    };
    match tokio::time::timeout(KILL_TIMEOUT, attempt).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(
            container,
            "could not kill a command in the container: {}",
            message_of(&error)
        ),
        Err(_) => tracing::warn!(
            container,
            "killing a command in the container took over {} s",
            KILL_TIMEOUT.as_secs()
        ),
    }
}

/// Kills the command if its `run` future is dropped mid-flight (the turn
/// was interrupted, a lease was lost), so no process outlives its caller.
struct KillOnDrop {
    docker: Docker,
    container: String,
    mark: Option<String>,
}

impl KillOnDrop {
    fn disarm(&mut self) {
        self.mark = None;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let Some(mark) = self.mark.take() else {
            return;
        };
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let docker = self.docker.clone();
            let container = std::mem::take(&mut self.container);
            handle.spawn(async move { kill(&docker, &container, &mark).await });
        }
    }
}

/// A readable error for a failed exec call.
fn exec_error(container: &str, program: &str, error: &bollard::errors::Error) -> anyhow::Error {
    let message = message_of(error);
    let hint = match status_of(error) {
        Some(404) => " (the container no longer exists)",
        Some(409) if message.contains("paused") => "; resume the thread's runner first",
        Some(409) => "; the container is not running",
        _ => "",
    };
    anyhow::anyhow!("cannot run `{program}` in container {container}: {message}{hint}")
}

/// stdout and stderr, each capped at [`MAX_STREAM_BYTES`].
#[derive(Default)]
pub(crate) struct Capture {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    dropped_stdout: usize,
    dropped_stderr: usize,
}

impl Capture {
    fn push(&mut self, chunk: LogOutput) {
        match chunk {
            LogOutput::StdOut { message } | LogOutput::Console { message } => {
                self.push_stream(false, &message)
            }
            LogOutput::StdErr { message } => self.push_stream(true, &message),
            LogOutput::StdIn { .. } => {}
        }
    }

    /// Keeps what fits of `data` in stdout (or stderr), counting the rest.
    pub(crate) fn push_stream(&mut self, stderr: bool, data: &[u8]) {
        let (buffer, dropped) = if stderr {
            (&mut self.stderr, &mut self.dropped_stderr)
        } else {
            (&mut self.stdout, &mut self.dropped_stdout)
        };
        let room = MAX_STREAM_BYTES.saturating_sub(buffer.len());
        let kept = data.len().min(room);
        buffer.extend_from_slice(data.get(..kept).unwrap_or_default());
        *dropped += data.len() - kept;
    }

    /// The runtime's message when the process never started (missing
    /// program or working directory): the daemon reports that as output on
    /// stdout with exit status 126 or 127, which is not the command's own.
    fn start_failure(&self, exit_code: Option<i32>) -> Option<String> {
        let runtime_error = matches!(exit_code, Some(126 | 127))
            && self.stderr.is_empty()
            && self.stdout.starts_with(b"OCI runtime exec failed");
        runtime_error.then(|| String::from_utf8_lossy(&self.stdout).trim().to_string())
    }

    pub(crate) fn into_result(
        self,
        command_id: String,
        exit_code: Option<i32>,
        note: Option<String>,
    ) -> RunnerCommandResult {
        let mut stdout = String::from_utf8_lossy(&self.stdout).into_owned();
        let mut stderr = String::from_utf8_lossy(&self.stderr).into_owned();
        if self.dropped_stdout > 0 {
            append_note(
                &mut stdout,
                &format!("[stdout truncated: {} bytes omitted]", self.dropped_stdout),
            );
        }
        if self.dropped_stderr > 0 {
            append_note(
                &mut stderr,
                &format!("[stderr truncated: {} bytes omitted]", self.dropped_stderr),
            );
        }
        if let Some(note) = note {
            append_note(&mut stderr, &note);
        }
        RunnerCommandResult {
            command_id,
            exit_code,
            stdout,
            stderr,
        }
    }
}

fn append_note(text: &mut String, note: &str) {
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(note);
    text.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn capture_caps_each_stream_and_notes_it() {
        let mut capture = Capture::default();
        capture.push(LogOutput::StdOut {
            message: Bytes::from(vec![b'a'; MAX_STREAM_BYTES]),
        });
        capture.push(LogOutput::StdOut {
            message: Bytes::from_static(b"overflow"),
        });
        capture.push(LogOutput::StdErr {
            message: Bytes::from_static(b"err"),
        });
        let result = capture.into_result("c".into(), None, Some("command cancelled".into()));
        assert!(
            result
                .stdout
                .ends_with("[stdout truncated: 8 bytes omitted]\n")
        );
        assert_eq!(result.stderr, "err\ncommand cancelled\n");
        assert_eq!(result.exit_code, None);
    }
}
