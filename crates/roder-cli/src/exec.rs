//! `roder exec`: one non-interactive turn. Progress on stderr, the final
//! answer on stdout (or every event as JSON lines with `--json`). Ctrl-C
//! interrupts the turn cleanly; the thread is saved either way.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use roder_api::events::EventEnvelope;
use roder_api::inference::RuntimeProfile;
use roder_core::{CreateThreadRequest, Runtime, StartTurnRequest, ThreadRunnerSelection};
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast::error::RecvError;

use crate::cli::ExecArgs;
use crate::config::{RunnerEntry, Settings};
use crate::progress::{Ending, Progress};
use crate::wiring;

pub async fn run(settings: &Settings, args: ExecArgs) -> anyhow::Result<ExitCode> {
    let workspace = match &args.workspace {
        Some(path) => path.clone(),
        None => std::env::current_dir()?,
    };
    let workspace = tokio::fs::canonicalize(&workspace)
        .await
        .map_err(|error| anyhow::anyhow!("workspace {}: {error}", workspace.display()))?;
    let deadline = args.deadline;
    let wired = wiring::runtime(settings, &workspace, |config| {
        config.runtime_profile = RuntimeProfile::NonInteractive;
        config.turn_deadline_seconds = deadline;
    })?;
    let outcome = run_turn(settings, &args, &wired.runtime, &workspace).await;
    wired.shutdown().await;
    outcome
}

async fn run_turn(
    settings: &Settings,
    args: &ExecArgs,
    runtime: &Arc<Runtime>,
    workspace: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    // Subscribed first, so a new thread's ThreadCreated is seen too.
    let mut events = runtime.subscribe_events();
    let thread_id = match &args.thread {
        Some(thread_id) => {
            if runtime.load_thread(thread_id).await?.is_none() {
                anyhow::bail!(
                    "thread \"{thread_id}\" does not exist in {}",
                    settings.threads_dir().display()
                );
            }
            thread_id.clone()
        }
        None => create_thread(runtime, settings, args, workspace).await?,
    };
    // Registered before the turn starts, so an early Ctrl-C interrupts the
    // turn instead of killing the process.
    let mut interrupts = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut request = StartTurnRequest::new(&thread_id, &args.prompt);
    request.workspace = workspace.display().to_string();
    let turn_id = runtime.start_turn(request).await?;
    let mut progress = Progress::new(args.json);
    let mut last_seq = 0;
    let mut interrupted = false;
    let ending = loop {
        tokio::select! {
            received = events.recv() => {
                let batch = match received {
                    Ok(envelope) if envelope.thread_id == thread_id => vec![envelope],
                    Ok(_) => continue,
                    // Fell behind the bus: the persisted log has everything.
                    Err(RecvError::Lagged(_)) => runtime.read_thread_events(&thread_id, last_seq).await?.events,
                    Err(RecvError::Closed) => anyhow::bail!("the runtime stopped before the turn ended"),
                };
                if let Some(ending) = show(&mut progress, &mut last_seq, batch).await? {
                    break ending;
                }
            }
            _ = interrupts.recv(), if !interrupted => {
                interrupted = true;
                progress.note("interrupting the turn…");
                runtime.interrupt_turn(&thread_id, &turn_id).await?;
            }
        }
    };
    progress.finish();
    if !args.json {
        eprintln!(
            "roder: thread {thread_id} (continue with: roder exec --thread {thread_id} \"…\")"
        );
    }
    Ok(match ending {
        Ending::Completed(answer) => {
            if !args.json {
                let mut stdout = tokio::io::stdout();
                stdout.write_all(answer.as_bytes()).await?;
                if !answer.ends_with('\n') {
                    stdout.write_all(b"\n").await?;
                }
                stdout.flush().await?;
            }
            ExitCode::SUCCESS
        }
        Ending::Failed(error) => {
            eprintln!("roder: the turn failed: {error}");
            ExitCode::FAILURE
        }
        Ending::Interrupted => {
            eprintln!("roder: the turn was interrupted");
            ExitCode::from(130)
        }
        Ending::DeadlineExceeded => {
            eprintln!("roder: the turn's deadline passed");
            ExitCode::from(124)
        }
    })
}

/// Shows events not seen yet; returns how the turn ended once it has.
async fn show(
    progress: &mut Progress,
    last_seq: &mut u64,
    batch: Vec<EventEnvelope>,
) -> anyhow::Result<Option<Ending>> {
    for envelope in batch {
        if envelope.seq <= *last_seq {
            continue;
        }
        *last_seq = envelope.seq;
        if let Some(ending) = progress.event(&envelope).await? {
            return Ok(Some(ending));
        }
    }
    Ok(None)
}

async fn create_thread(
    runtime: &Runtime,
    settings: &Settings,
    args: &ExecArgs,
    workspace: &std::path::Path,
) -> anyhow::Result<String> {
    let mut request = CreateThreadRequest::in_workspace(workspace.display().to_string());
    if let Some(name) = &args.runner {
        let entry = settings.runners.get(name).ok_or_else(|| {
            anyhow::anyhow!(
                "runner \"{name}\" is not configured (configured: {}); add a [runners.{name}] table with provider and config",
                settings.runners.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })?;
        request.runner = Some(ThreadRunnerSelection {
            provider_id: entry.provider.clone(),
            config: serde_json::to_value(&entry.config)?,
            workspace: runner_workspace(name, entry)?.display().to_string(),
            read_roots: Vec::new(),
        });
    }
    Ok(runtime.create_thread_with(request).await?.thread_id)
}

/// The workspace path inside a runner: its config's `working_dir`, `workdir`
/// or `root`, else the provider's usual place.
fn runner_workspace(name: &str, entry: &RunnerEntry) -> anyhow::Result<PathBuf> {
    for key in ["working_dir", "workdir", "root"] {
        if let Some(path) = entry.config.get(key).and_then(toml::Value::as_str) {
            return Ok(PathBuf::from(path));
        }
    }
    match entry.provider.as_str() {
        "docker" => Ok(PathBuf::from("/workspace")),
        "sprites" => Ok(PathBuf::from(roder_ext_runner_sprites::DEFAULT_WORKING_DIR)),
        _ => anyhow::bail!(
            "runner \"{name}\" needs config.working_dir: the absolute workspace path inside the runner"
        ),
    }
}

impl Progress {
    async fn event(&mut self, envelope: &EventEnvelope) -> anyhow::Result<Option<Ending>> {
        if self.json() {
            let mut line = serde_json::to_string(envelope)?;
            line.push('\n');
            let mut stdout = tokio::io::stdout();
            stdout.write_all(line.as_bytes()).await?;
            stdout.flush().await?;
        }
        Ok(self.handle(&envelope.event))
    }
}
