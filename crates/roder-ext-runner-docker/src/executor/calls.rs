//! Commands and files through the helper, with the same results and the
//! same error wording as the plain exec and archive paths. Each call has a
//! span of its own (`executor exec`, `executor read_file`, `executor
//! write_file`, target `roder::trace`) under the tool span that made it:
//! what the container took, apart from the runtime's share. No command
//! line, path or content is recorded, only the program's name.

use anyhow::bail;
use roder_api::remote_runner::RunnerCommandResult;
use roder_executor::client::{Executor, ExecutorError, Output};
use roder_executor::message::{Ending, ExecSpec};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::archive::{MAX_READ_BYTES, WriteRules};
use crate::exec::{Capture, ExecRequest};

/// The span of one call to the helper.
fn call_span(operation: &'static str) -> tracing::Span {
    tracing::info_span!(
        target: "roder::trace",
        "executor_call",
        otel.name = format!("executor {operation}"),
        otel.status_code = Empty,
        otel.status_description = Empty,
        roder.executor.operation = operation,
        process.executable.name = Empty,
        process.exit.code = Empty,
    )
}

/// Marks `span` failed with `error`'s first line.
fn failed<T>(span: &tracing::Span, outcome: &anyhow::Result<T>) {
    if let Err(error) = outcome {
        span.record("otel.status_code", "ERROR");
        span.record(
            "otel.status_description",
            error.to_string().lines().next().unwrap_or_default(),
        );
    }
}

/// Runs `request` through the helper; `cancel` kills its tree.
pub async fn run_command(
    executor: &Executor,
    request: ExecRequest,
    cancel: &CancellationToken,
) -> anyhow::Result<RunnerCommandResult> {
    let span = call_span("exec");
    let program = request.argv.first().cloned().unwrap_or_default();
    span.record(
        "process.executable.name",
        program.rsplit('/').next().unwrap_or_default(),
    );
    let outcome = run_command_untraced(executor, request, cancel)
        .instrument(span.clone())
        .await;
    if let Ok(result) = &outcome
        && let Some(code) = result.exit_code
    {
        span.record("process.exit.code", code);
    }
    failed(&span, &outcome);
    outcome
}

async fn run_command_untraced(
    executor: &Executor,
    request: ExecRequest,
    cancel: &CancellationToken,
) -> anyhow::Result<RunnerCommandResult> {
    let program = request.argv.first().cloned().unwrap_or_default();
    let timeout_ms = request.timeout.map(|timeout| {
        u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    });
    let spec = ExecSpec {
        argv: request.argv.into_iter().map(String::into_bytes).collect(),
        cwd: request.cwd.clone().into_bytes(),
        env: request.env.into_iter().map(String::into_bytes).collect(),
        timeout_ms: timeout_ms.unwrap_or(0),
        stdin: false,
    };
    let mut capture = Capture::default();
    let finished = executor
        .run(spec, cancel.cancelled(), &mut |stream, data| {
            capture.push_stream(stream == Output::Stderr, data)
        })
        .await;
    let finished = match finished {
        Ok(finished) => finished,
        Err(ExecutorError::Failed { message, .. }) => {
            bail!(
                "failed to start `{program}` in `{}`: {message}",
                request.cwd
            )
        }
        Err(lost) => bail!("`{program}` did not finish: {lost}"),
    };
    let (exit_code, note) = match finished.ending {
        Ending::Exited(code) => (Some(code), None),
        Ending::TimedOut => (
            None,
            Some(format!(
                "command timed out after {} ms",
                timeout_ms.unwrap_or_default()
            )),
        ),
        Ending::Killed => (None, Some("command cancelled".to_string())),
    };
    Ok(capture.into_result(request.command_id, exit_code, note))
}

/// Reads the regular file at absolute `path` (links followed).
pub async fn read_file(executor: &Executor, path: &str) -> anyhow::Result<Vec<u8>> {
    let span = call_span("read_file");
    let outcome = read_file_untraced(executor, path)
        .instrument(span.clone())
        .await;
    failed(&span, &outcome);
    outcome
}

async fn read_file_untraced(executor: &Executor, path: &str) -> anyhow::Result<Vec<u8>> {
    match executor
        .read_file(path.as_bytes(), MAX_READ_BYTES as u64)
        .await
    {
        Ok(contents) => Ok(contents),
        Err(ExecutorError::Failed { errno, .. }) if errno == libc_errno::ENOENT => {
            bail!("no such file `{path}` in the container")
        }
        Err(ExecutorError::Failed { errno, .. }) if errno == libc_errno::EFBIG => {
            bail!("`{path}` is larger than the {MAX_READ_BYTES}-byte read limit")
        }
        Err(ExecutorError::Failed { errno, message }) if errno == libc_errno::EISDIR => {
            bail!("{message}")
        }
        Err(error) => bail!("cannot read `{path}`: {error}"),
    }
}

/// Writes `contents` to absolute `path`, creating missing parents; an
/// existing file keeps its permission bits.
pub async fn write_file(
    executor: &Executor,
    path: &str,
    contents: &[u8],
    rules: &WriteRules,
) -> anyhow::Result<()> {
    let span = call_span("write_file");
    let outcome = write_file_untraced(executor, path, contents, rules)
        .instrument(span.clone())
        .await;
    failed(&span, &outcome);
    outcome
}

async fn write_file_untraced(
    executor: &Executor,
    path: &str,
    contents: &[u8],
    rules: &WriteRules,
) -> anyhow::Result<()> {
    match executor.write_file(path.as_bytes(), contents, 0).await {
        Ok(()) => Ok(()),
        Err(ExecutorError::Failed { errno, .. }) if errno == libc_errno::EROFS => {
            let mut roots = rules.writable.clone().unwrap_or_default();
            roots.sort();
            let target = executor
                .resolve(path.as_bytes())
                .await
                .map(|resolved| String::from_utf8_lossy(&resolved).into_owned())
                .unwrap_or_else(|_| path.to_string());
            let leads = if target == path {
                String::new()
            } else {
                format!(" (it leads to `{target}`)")
            };
            bail!(
                "cannot write `{path}`{leads}: the container's root filesystem is read-only under the sandbox policy; only {} are writable",
                roots.join(", ")
            )
        }
        Err(ExecutorError::Failed { errno, message }) if errno == libc_errno::EISDIR => {
            bail!("{message}")
        }
        Err(error) => bail!("cannot write `{path}`: {error}"),
    }
}

/// The Linux errno values the helper reports (its container is Linux
/// whatever the host is).
mod libc_errno {
    pub const ENOENT: i32 = 2;
    pub const EISDIR: i32 = 21;
    pub const EFBIG: i32 = 27;
    pub const EROFS: i32 = 30;
}
