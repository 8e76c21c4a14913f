//! Running one command on this host: its own process group, combined output,
//! a timeout and cancellation that kill the whole group.
//!
//! This is on the hot path of every `shell` and `exec_command` call (the
//! tool-loop benchmark compares it with a raw spawn), so it adds no thread, no
//! wrapper shell and no extra task: one pipe shared by stdout and stderr (so
//! the output interleaves as a terminal would show it), read on the calling
//! task while it waits for the child.

use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use crate::output::CappedOutput;
use crate::tool::ToolError;
use crate::workspace::{CommandEnd, CommandOutcome, CommandRequest};

const READ_CHUNK: usize = 16 * 1024;

/// Kills the command's process group when dropped while armed.
///
/// A tool future can be dropped at any await (the turn is interrupted, a
/// lease is lost, the runtime shuts down); without this guard the command and
/// everything it started would keep running unsupervised.
struct ProcessGroupGuard {
    pgid: Option<libc::pid_t>,
}

impl ProcessGroupGuard {
    fn new(pid: Option<u32>) -> Self {
        Self {
            pgid: pid.and_then(|pid| libc::pid_t::try_from(pid).ok()),
        }
    }

    /// Kills the group now and disarms the guard.
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            kill_process_group(pgid);
        }
    }

    /// The command finished on its own: leave whatever it deliberately put
    /// in the background alone.
    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for ProcessGroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

fn kill_process_group(pgid: libc::pid_t) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg has no memory-safety preconditions; a stale or foreign
    // group id only yields an error, which there is nothing to do about.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// Runs `request` on this host. `Err` only when the command could not start.
pub(crate) async fn run_local(
    request: &CommandRequest,
    cancellation: &CancellationToken,
    output_cap: usize,
) -> Result<CommandOutcome, ToolError> {
    let started = Instant::now();
    let (sender, mut receiver) = pipe::pipe()
        .map_err(|error| ToolError::new(format!("failed to create an output pipe: {error}")))?;
    let stdout = sender
        .into_blocking_fd()
        .map_err(|error| ToolError::new(format!("failed to prepare the output pipe: {error}")))?;
    let stderr = stdout
        .try_clone()
        .map_err(|error| ToolError::new(format!("failed to prepare the output pipe: {error}")))?;

    let mut command = tokio::process::Command::new(&request.program);
    command
        .args(&request.args)
        .current_dir(&request.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0);
    for (key, value) in &request.env {
        command.env(key, value);
    }
    let spawned = command.spawn();
    // The command holds our copies of the pipe's write end; dropping it now
    // lets the reader see end-of-file once the command's group is done.
    drop(command);
    let mut child = spawned.map_err(|error| {
        ToolError::new(format!(
            "failed to start {} in {}: {error}",
            request.program,
            request.cwd.display()
        ))
    })?;
    let mut guard = ProcessGroupGuard::new(child.id());

    let mut output = CappedOutput::new(output_cap);
    let mut chunk = vec![0_u8; READ_CHUNK];
    let mut eof = false;
    let timeout = tokio::time::sleep(
        request
            .timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(Duration::MAX),
    );
    tokio::pin!(timeout);
    let cancelled = cancellation.cancelled();
    tokio::pin!(cancelled);

    let end = loop {
        tokio::select! {
            biased;
            _ = &mut cancelled => {
                guard.kill();
                let _ = child.wait().await;
                break CommandEnd::Interrupted;
            }
            _ = &mut timeout, if request.timeout_ms.is_some() => {
                guard.kill();
                let _ = child.wait().await;
                break CommandEnd::TimedOut;
            }
            status = child.wait() => {
                let status = status.map_err(|error| {
                    ToolError::new(format!("failed to wait for {}: {error}", request.program))
                })?;
                guard.disarm();
                break CommandEnd::Exited {
                    code: status.code(),
                    signal: status.signal(),
                };
            }
            read = receiver.read(&mut chunk), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => output.push(&chunk[..n]),
            },
        }
    };

    // Everything the command wrote before it ended is already in the pipe.
    // Read it without waiting: a background process that inherited the pipe
    // may keep it open indefinitely, and its later output is not this call's.
    if !eof {
        loop {
            match receiver.try_read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => output.push(&chunk[..n]),
            }
        }
    }

    Ok(CommandOutcome {
        end,
        output: output.finish(),
        wall: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn request(script: &str, cwd: &Path, timeout_ms: Option<u64>) -> CommandRequest {
        CommandRequest {
            program: "sh".to_string(),
            args: vec!["-c".to_string(), script.to_string()],
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            timeout_ms,
        }
    }

    fn process_is_gone(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            // A killed process whose parent has not reaped it yet is a zombie:
            // it no longer runs.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    /// Polls a condition the kernel reports no event for, with a deadline.
    async fn eventually(mut condition: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if condition() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        condition()
    }

    async fn read_pid(path: PathBuf) -> i32 {
        assert!(
            eventually(|| std::fs::read_to_string(&path).is_ok_and(|s| s.ends_with('\n'))).await
        );
        std::fs::read_to_string(&path)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[tokio::test]
    async fn captures_interleaved_stdout_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run_local(
            &request(
                "echo out; echo err >&2; echo out2; exit 3",
                dir.path(),
                None,
            ),
            &CancellationToken::new(),
            1024,
        )
        .await
        .unwrap();
        assert_eq!(outcome.output.text, "out\nerr\nout2\n");
        assert_eq!(
            outcome.end,
            CommandEnd::Exited {
                code: Some(3),
                signal: None
            }
        );
    }

    #[tokio::test]
    async fn runs_in_the_requested_directory() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run_local(
            &request("pwd", dir.path(), None),
            &CancellationToken::new(),
            1024,
        )
        .await
        .unwrap();
        let expected = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(outcome.output.text.trim(), expected.to_str().unwrap());
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run_local(
            &request("sleep 30 & echo $! > pid; wait", dir.path(), Some(300)),
            &CancellationToken::new(),
            1024,
        )
        .await
        .unwrap();
        assert_eq!(outcome.end, CommandEnd::TimedOut);
        assert!(outcome.wall < Duration::from_secs(10));
        let pid = read_pid(dir.path().join("pid")).await;
        assert!(
            eventually(|| process_is_gone(pid)).await,
            "sleep {pid} survived"
        );
    }

    #[tokio::test]
    async fn cancellation_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let token = CancellationToken::new();
        let pid_path = dir.path().join("pid");
        let canceller = {
            let token = token.clone();
            let pid_path = pid_path.clone();
            async move {
                let pid = read_pid(pid_path).await;
                token.cancel();
                pid
            }
        };
        let req = request("sleep 30 & echo $! > pid; wait", dir.path(), None);
        let (outcome, pid) = tokio::join!(run_local(&req, &token, 1024), canceller);
        assert_eq!(outcome.unwrap().end, CommandEnd::Interrupted);
        assert!(
            eventually(|| process_is_gone(pid)).await,
            "sleep {pid} survived"
        );
    }

    #[tokio::test]
    async fn dropping_the_future_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let pid_path = dir.path().join("pid");
        let req = request("sleep 30 & echo $! > pid; wait", dir.path(), None);
        let token = CancellationToken::new();
        let pid = {
            let run = run_local(&req, &token, 1024);
            tokio::pin!(run);
            tokio::select! {
                _ = &mut run => panic!("the command should still be running"),
                pid = read_pid(pid_path) => pid,
            }
        };
        assert!(
            eventually(|| process_is_gone(pid)).await,
            "sleep {pid} survived"
        );
    }

    #[tokio::test]
    async fn a_background_process_holding_the_pipe_does_not_block_the_result() {
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let outcome = run_local(
            &request("sleep 5 & echo $! > pid; echo done", dir.path(), None),
            &CancellationToken::new(),
            1024,
        )
        .await
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(outcome.output.text, "done\n");
        // Deliberately backgrounded work outlives a command that finished.
        let pid = read_pid(dir.path().join("pid")).await;
        assert!(!process_is_gone(pid));
        kill_process_group(pid);
        // SAFETY: plain kill of the pid we started.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }

    #[tokio::test]
    async fn spawn_failures_are_errors_naming_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let mut req = request("true", dir.path(), None);
        req.program = "/definitely/not/a/shell".to_string();
        let error = run_local(&req, &CancellationToken::new(), 1024)
            .await
            .unwrap_err();
        assert!(
            error.0.contains("failed to start /definitely/not/a/shell"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn signals_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let outcome = run_local(
            &request("kill -9 $$", dir.path(), None),
            &CancellationToken::new(),
            1024,
        )
        .await
        .unwrap();
        assert_eq!(
            outcome.end,
            CommandEnd::Exited {
                code: None,
                signal: Some(9)
            }
        );
    }
}
