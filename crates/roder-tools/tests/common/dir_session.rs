//! A fake runner session over a host directory: runner paths are host paths,
//! commands are host processes. It behaves like a real provider (missing
//! files are errors, parents are not created on write, timeouts kill) and
//! records every request so tests can check what the tools sent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerCommandId, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileReadResult, RunnerFileWriteRequest, RunnerPortRequest,
    RunnerPortResult, RunnerSessionState, RunnerSnapshotRef,
};

pub struct DirSession {
    pub root: PathBuf,
    pub commands: Mutex<Vec<RunnerCommandRequest>>,
    pub reads: Mutex<Vec<PathBuf>>,
    pub writes: Mutex<Vec<PathBuf>>,
    pub cancels: Mutex<Vec<String>>,
    running: Mutex<HashMap<String, i32>>,
}

impl DirSession {
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            commands: Mutex::default(),
            reads: Mutex::default(),
            writes: Mutex::default(),
            cancels: Mutex::default(),
            running: Mutex::default(),
        }
    }

    fn host_path(&self, path: &Path) -> PathBuf {
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        }
    }
}

fn kill_group(pgid: i32) {
    // SAFETY: killpg has no memory-safety preconditions.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

#[async_trait::async_trait]
impl RemoteRunnerSession for DirSession {
    fn state(&self) -> RunnerSessionState {
        RunnerSessionState {
            provider_id: "dir-fake".to_string(),
            session_id: "dir-session".to_string(),
            destination_id: "dir-destination".to_string(),
            snapshot: None,
            metadata: serde_json::Value::Null,
        }
    }

    async fn run_command(
        &self,
        request: RunnerCommandRequest,
    ) -> anyhow::Result<RunnerCommandResult> {
        self.commands.lock().unwrap().push(request.clone());
        let mut command = tokio::process::Command::new(&request.program);
        command
            .args(&request.args)
            .current_dir(request.cwd.clone().unwrap_or_else(|| self.root.clone()))
            .envs(request.env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let child = command.spawn()?;
        let pid = child.id().unwrap() as i32;
        self.running
            .lock()
            .unwrap()
            .insert(request.command_id.clone(), pid);
        let output = child.wait_with_output();
        let result = match request.timeout_ms {
            Some(ms) => match tokio::time::timeout(Duration::from_millis(ms), output).await {
                Ok(output) => Some(output?),
                Err(_) => {
                    kill_group(pid);
                    None
                }
            },
            None => Some(output.await?),
        };
        self.running.lock().unwrap().remove(&request.command_id);
        Ok(match result {
            Some(output) => RunnerCommandResult {
                command_id: request.command_id,
                exit_code: output.status.code(),
                stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            },
            None => RunnerCommandResult {
                command_id: request.command_id,
                exit_code: None,
                stdout: String::new(),
                stderr: String::new(),
            },
        })
    }

    async fn cancel_command(&self, command_id: &RunnerCommandId) -> anyhow::Result<bool> {
        self.cancels.lock().unwrap().push(command_id.clone());
        let pid = self.running.lock().unwrap().remove(command_id);
        if let Some(pid) = pid {
            kill_group(pid);
        }
        Ok(pid.is_some())
    }

    async fn read_file(
        &self,
        request: RunnerFileReadRequest,
    ) -> anyhow::Result<RunnerFileReadResult> {
        self.reads.lock().unwrap().push(request.path.clone());
        let contents = tokio::fs::read(self.host_path(&request.path)).await?;
        Ok(RunnerFileReadResult {
            path: request.path,
            contents,
        })
    }

    async fn write_file(&self, request: RunnerFileWriteRequest) -> anyhow::Result<()> {
        self.writes.lock().unwrap().push(request.path.clone());
        tokio::fs::write(self.host_path(&request.path), request.contents).await?;
        Ok(())
    }

    async fn expose_port(&self, _request: RunnerPortRequest) -> anyhow::Result<RunnerPortResult> {
        anyhow::bail!("ports are not supported by the directory fake")
    }

    async fn snapshot(&self) -> anyhow::Result<Option<RunnerSnapshotRef>> {
        Ok(None)
    }

    async fn close(&self) -> anyhow::Result<()> {
        Ok(())
    }
}
