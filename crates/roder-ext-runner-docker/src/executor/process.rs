//! Interactive processes through the helper
//! (`RemoteRunnerSession::spawn_process`): an MCP server placed in the
//! sandbox speaks over these, its side effects staying in the container.

use roder_api::remote_runner::{RunnerProcess, RunnerProcessEvent};
use roder_executor::client::{Executor, Output, Process, ProcessEvent};
use roder_executor::message::{Ending, ExecSpec};

/// A helper process; dropping it kills its tree (the client's rule).
pub struct HelperProcess {
    process: Process,
    ended: Option<Option<i32>>,
}

/// Starts `argv` in `cwd` with stdin open.
pub fn spawn(
    executor: &Executor,
    argv: Vec<String>,
    cwd: String,
    env: Vec<String>,
) -> anyhow::Result<HelperProcess> {
    let process = executor.spawn(ExecSpec {
        argv: argv.into_iter().map(String::into_bytes).collect(),
        cwd: cwd.into_bytes(),
        env: env.into_iter().map(String::into_bytes).collect(),
        timeout_ms: 0,
        stdin: true,
    })?;
    Ok(HelperProcess {
        process,
        ended: None,
    })
}

#[async_trait::async_trait]
impl RunnerProcess for HelperProcess {
    fn write_stdin(&self, data: &[u8]) -> anyhow::Result<()> {
        Ok(self.process.write_stdin(data)?)
    }

    fn close_stdin(&self) -> anyhow::Result<()> {
        Ok(self.process.close_stdin()?)
    }

    async fn next_event(&mut self) -> anyhow::Result<RunnerProcessEvent> {
        if let Some(exit_code) = self.ended {
            return Ok(RunnerProcessEvent::Exited { exit_code });
        }
        Ok(match self.process.next().await? {
            ProcessEvent::Output(Output::Stdout, data) => RunnerProcessEvent::Stdout(data),
            ProcessEvent::Output(Output::Stderr, data) => RunnerProcessEvent::Stderr(data),
            ProcessEvent::Finished(finished) => {
                let exit_code = match finished.ending {
                    Ending::Exited(code) => Some(code),
                    Ending::TimedOut | Ending::Killed => None,
                };
                self.ended = Some(exit_code);
                RunnerProcessEvent::Exited { exit_code }
            }
        })
    }
}
