//! Running one command on this host, supervised by `roder-sandbox`: its own
//! process group, combined output, a timeout and cancellation that kill the
//! whole group, and (Linux) the group killed by the sandbox's warden if
//! Roder dies.
//!
//! This is on the hot path of every `shell` and `exec_command` call (the
//! tool-loop benchmark compares it with a raw spawn): the sandbox reads the
//! one pipe shared by stdout and stderr (so the output interleaves as a
//! terminal would show it) on the calling task; no extra task or shell.

use roder_sandbox::{CommandSpec, Confinement, Ending, OutputMode};
use tokio_util::sync::CancellationToken;

use crate::output::CappedOutput;
use crate::tool::ToolError;
use crate::workspace::{CommandEnd, CommandOutcome, CommandRequest};

/// Runs `request` on this host. `Err` only when the command could not start.
pub(crate) async fn run_local(
    request: &CommandRequest,
    cancellation: &CancellationToken,
    output_cap: usize,
    confinement: &Confinement,
) -> Result<CommandOutcome, ToolError> {
    let output_cap = match confinement.policy.limits.output_bytes {
        Some(limit) => output_cap.min(usize::try_from(limit).unwrap_or(usize::MAX)),
        None => output_cap,
    };
    let spec = CommandSpec {
        program: request.program.clone().into(),
        args: request.args.iter().map(Into::into).collect(),
        cwd: request.cwd.clone(),
        env_remove: Vec::new(),
        env: request
            .env
            .iter()
            .map(|(key, value)| (key.into(), value.into()))
            .collect(),
        timeout: request.timeout_ms.map(std::time::Duration::from_millis),
        output: OutputMode::Combined,
        confinement: Some(confinement.clone()),
    };
    let mut output = CappedOutput::new(output_cap);
    let mut sink = |_stream, bytes: &[u8]| output.push(bytes);
    let finished = roder_sandbox::run(&spec, cancellation, &mut sink)
        .await
        .map_err(|error| {
            ToolError::new(format!(
                "failed to start {} in {}: {error}",
                request.program,
                request.cwd.display()
            ))
        })?;
    let end = match finished.ending {
        Ending::Exited { code, signal } => CommandEnd::Exited { code, signal },
        Ending::TimedOut => CommandEnd::TimedOut,
        Ending::Cancelled => CommandEnd::Interrupted,
    };
    Ok(CommandOutcome {
        end,
        output: output.finish(),
        wall: finished.wall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    fn request(script: &str, cwd: &Path, timeout_ms: Option<u64>) -> CommandRequest {
        CommandRequest {
            program: "sh".to_string(),
            args: vec!["-c".to_string(), script.to_string()],
            cwd: cwd.to_path_buf(),
            env: Vec::new(),
            timeout_ms,
        }
    }

    /// The default policy (enforced, network off) over `dir`: every test
    /// here runs confined, as every model's command does.
    fn confined(dir: &Path) -> Confinement {
        Confinement::new(
            roder_api::sandbox_policy::SandboxPolicy::default(),
            dir.to_path_buf(),
        )
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
            &confined(dir.path()),
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
            &confined(dir.path()),
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
            &confined(dir.path()),
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
        let confinement = confined(dir.path());
        let (outcome, pid) = tokio::join!(run_local(&req, &token, 1024, &confinement), canceller);
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
            let confinement = confined(dir.path());
            let run = run_local(&req, &token, 1024, &confinement);
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
            &confined(dir.path()),
        )
        .await
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(outcome.output.text, "done\n");
        // Deliberately backgrounded work outlives a command that finished.
        let pid = read_pid(dir.path().join("pid")).await;
        assert!(!process_is_gone(pid));
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
        let error = run_local(&req, &CancellationToken::new(), 1024, &confined(dir.path()))
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
            &confined(dir.path()),
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
