//! Helpers for tests that run real processes through a session: this
//! crate's, and (with the `test-support` feature) those of runners built on
//! it, so every such test waits for processes the same bounded way.
//!
//! Failures panic with a message: these only ever run inside tests.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use roder_api::remote_runner::{RemoteRunnerSession, RunnerCommandRequest, RunnerCommandResult};
use tokio::task::JoinHandle;

/// A bound for waits on things a test observes (never a sleep-to-sync).
pub const WAIT_LIMIT: Duration = Duration::from_secs(10);

/// `sh -c script` as command `id`, in the session's working directory.
pub fn sh(id: &str, script: &str) -> RunnerCommandRequest {
    RunnerCommandRequest {
        command_id: id.to_string(),
        program: "sh".to_string(),
        args: vec!["-c".to_string(), script.to_string()],
        cwd: None,
        env: Vec::new(),
        timeout_ms: None,
    }
}

/// Whether `pid` is gone or a zombie (dead, waiting for a reaper that a
/// container's init may never be).
pub async fn process_is_dead(pid: u32) -> bool {
    match tokio::fs::read_to_string(format!("/proc/{pid}/stat")).await {
        Err(_) => true,
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        }
    }
}

/// Polls (bounded) until the process is dead: SIGKILL delivery and reaping
/// are asynchronous, so the check cannot be a single read.
pub async fn wait_dead(pid: u32) -> bool {
    tokio::time::timeout(WAIT_LIMIT, async {
        while !process_is_dead(pid).await {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .is_ok()
}

/// Waits (bounded) until `path` holds a complete line: a command announcing
/// itself (`echo $$ > pid`) may be seen mid-write otherwise.
pub async fn wait_for_line(path: &Path) {
    let waited = tokio::time::timeout(WAIT_LIMIT, async {
        loop {
            if let Ok(text) = tokio::fs::read_to_string(path).await
                && text.ends_with('\n')
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    if waited.is_err() {
        panic!("`{}` never got a complete line", path.display());
    }
}

/// The process id a command wrote to `path`.
pub async fn read_pid(path: &Path) -> u32 {
    let text = match tokio::fs::read_to_string(path).await {
        Ok(text) => text,
        Err(error) => panic!("cannot read a pid from `{}`: {error}", path.display()),
    };
    match text.trim().parse() {
        Ok(pid) => pid,
        Err(error) => panic!("`{}` holds no pid ({text:?}): {error}", path.display()),
    }
}

/// Starts `script` as command `id` on another task, so the test can cancel
/// or drop it, and waits until the script wrote a pid to `pid_file`.
pub async fn start_announced(
    session: Arc<dyn RemoteRunnerSession>,
    id: &str,
    script: &str,
    pid_file: &Path,
) -> (JoinHandle<anyhow::Result<RunnerCommandResult>>, u32) {
    let request = sh(id, script);
    let running = tokio::spawn(async move { session.run_command(request).await });
    wait_for_line(pid_file).await;
    (running, read_pid(pid_file).await)
}
