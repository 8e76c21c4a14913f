//! `roder exec`: one non-interactive turn. Progress on stderr, the final
//! answer on stdout (or every event as JSON lines with `--json`). Ctrl-C,
//! SIGTERM (what `timeout`, systemd and CI send) and SIGHUP interrupt the
//! turn cleanly: its commands are killed, the thread is saved, and the exit
//! code is 128 + the signal's number.
//!
//! Exit codes: 0 completed, 1 failed (or any error), 3 completed with an
//! incomplete answer, 75 the thread is busy (another turn or another process
//! writes it), 124 deadline, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use roder_api::events::EventEnvelope;
use roder_api::inference::RuntimeProfile;
use roder_api::writer_lease::ThreadWriterBusy;
use roder_core::{
    CreateThreadRequest, Runtime, RuntimeError, StartTurnRequest, ThreadRunnerSelection,
};
use tokio::io::AsyncWriteExt;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::broadcast::error::RecvError;

use crate::cli::ExecArgs;
use crate::config::{RunnerEntry, Settings};
use crate::progress::{Ending, Progress};
use crate::terminal_approver::{self, TerminalApprover};
use crate::wiring;
use roder_api::policy_mode::PolicyMode;
use roder_api::profile::ProfileSnapshot;

/// Exit code when the thread is busy elsewhere (`EX_TEMPFAIL`: try later).
const EXIT_BUSY: u8 = 75;
/// Exit code when the turn completed but its answer is not whole.
const EXIT_INCOMPLETE: u8 = 3;

/// `roder exec`: the prompt is argv's, or standard input's for `-`.
pub async fn run(settings: &Settings, mut args: ExecArgs) -> anyhow::Result<ExitCode> {
    args.prompt = crate::prompt_input::resolve(&args.prompt).await?;
    run_with_prompt(settings, args).await
}

/// `roder exec` once `args.prompt` is the prompt itself (never `-`).
pub async fn run_with_prompt(settings: &Settings, args: ExecArgs) -> anyhow::Result<ExitCode> {
    // Registered first: from here on these signals interrupt instead of
    // killing the process with a turn open.
    let mut signals = StopSignals::register()?;
    let workspace = match &args.workspace {
        Some(path) => path.clone(),
        None => std::env::current_dir()?,
    };
    let workspace = tokio::fs::canonicalize(&workspace)
        .await
        .map_err(|error| anyhow::anyhow!("workspace {}: {error}", workspace.display()))?;
    // A new thread's profile is resolved first: it names the model whose
    // key is checked, and MCP servers the runtime is wired with.
    let profile = match &args.thread {
        None => crate::profiles_cmd::resolve_for_exec(settings, &args.profile, &workspace).await?,
        Some(thread_id) => {
            if args.profile.selector.is_some() || args.profile.archive.is_some() {
                anyhow::bail!(
                    "--profile applies to a new thread; thread {thread_id} keeps the profile it started with"
                );
            }
            None
        }
    };
    // A thread that runs as a profile keeps its MCP servers: its stored
    // snapshot's, never the profile file's today.
    let stored = match &args.thread {
        Some(thread_id) => stored_profile(settings, thread_id).await?,
        None => None,
    };
    if args.thread.is_none() {
        crate::preflight::model_key(settings, provider_of(settings, profile.as_ref()))?;
    }
    // A read-only or full home is said now, before a thread is half made.
    if settings.store == crate::config::store::StoreChoice::Jsonl {
        let threads = settings.threads_dir();
        tokio::task::spawn_blocking(move || roder_ext_jsonl_thread_store::check_writable(&threads))
            .await??;
    }
    let with_profile;
    let settings = match profile.as_ref().or(stored.as_ref()) {
        Some(profile) if !profile.mcp_servers.is_empty() => {
            with_profile = profile_mcp_servers(settings, profile)?;
            &with_profile
        }
        _ => settings,
    };
    let deadline = args.deadline;
    let mode = args.mode.unwrap_or(PolicyMode::Bypass);
    let wired = wiring::runtime(settings, &workspace, |config| {
        config.runtime_profile = RuntimeProfile::NonInteractive;
        config.turn_deadline_seconds = deadline;
        config.policy_mode = mode;
    })?;
    let outcome = run_turn(
        settings,
        &args,
        &wired.runtime,
        &workspace,
        &mut signals,
        profile,
    )
    .await;
    wired.shutdown().await;
    outcome
}

async fn run_turn(
    settings: &Settings,
    args: &ExecArgs,
    runtime: &Arc<Runtime>,
    workspace: &std::path::Path,
    signals: &mut StopSignals,
    profile: Option<ProfileSnapshot>,
) -> anyhow::Result<ExitCode> {
    // Subscribed first, so a new thread's ThreadCreated is seen too.
    let mut events = runtime.subscribe_events();
    let thread_id = match &args.thread {
        Some(thread_id) => {
            // Metadata only: the log is read (from its last compaction on)
            // when the turn starts.
            let metadata = match runtime.thread_metadata(thread_id).await {
                Ok(metadata) => metadata,
                Err(error) => {
                    if let Some(RuntimeError::ThreadNotFound(_)) = error.downcast_ref() {
                        anyhow::bail!(
                            "thread \"{thread_id}\" does not exist in {}",
                            settings.threads_dir().display()
                        );
                    }
                    return Err(error);
                }
            };
            let provider = metadata.provider.as_deref();
            crate::preflight::model_key(settings, provider.unwrap_or(&settings.model.provider))?;
            thread_id.clone()
        }
        None => create_thread(runtime, settings, args, workspace, profile).await?,
    };
    if let Some(signal) = signals.pending().await {
        eprintln!(
            "roder: {} before the turn started; thread {thread_id} unchanged",
            signal.name()
        );
        return Ok(ExitCode::from(signal.exit_code()));
    }
    // A person at the terminal answers what the mode asks.
    let asks = matches!(
        args.mode,
        Some(PolicyMode::Default | PolicyMode::AcceptEdits)
    );
    let _approver = (asks && !args.json && terminal_approver::available())
        .then(|| TerminalApprover::start(runtime.clone(), &thread_id));
    let mut request = StartTurnRequest::new(&thread_id, &args.prompt);
    request.workspace = workspace.display().to_string();
    // A caller that traces (CI, a harness) passes its context on.
    let options = roder_core::TurnOptions {
        traceparent: std::env::var("TRACEPARENT")
            .ok()
            .filter(|value| roder_api::telemetry::valid_traceparent(value)),
        ..roder_core::TurnOptions::default()
    };
    let turn_id = match runtime.start_turn_with(request, options).await {
        Ok(turn_id) => turn_id,
        Err(error) if is_busy(&error) => {
            eprintln!("roder: {error:#}");
            return Ok(ExitCode::from(EXIT_BUSY));
        }
        Err(error) => return Err(error),
    };
    let mut progress = Progress::new(args.json);
    let mut last_seq = 0;
    let mut stopped_by: Option<StopSignal> = None;
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
                if let Some(ending) = show(&mut progress, &mut last_seq, &turn_id, batch).await? {
                    break ending;
                }
            }
            signal = signals.recv() => {
                if let Some(first) = stopped_by {
                    // Asked twice: stop waiting. The commands die with this
                    // process (roder-sandbox's warden), and the next turn on
                    // the thread closes this one.
                    eprintln!(
                        "roder: {} again after {}: exiting without waiting for the turn to end",
                        signal.name(),
                        first.name()
                    );
                    return Ok(ExitCode::from(first.exit_code()));
                }
                stopped_by = Some(signal);
                progress.note(&format!(
                    "{}: interrupting the turn… (send it again to exit at once)",
                    signal.name()
                ));
                // On its own task, so the loop keeps reading events (the
                // TurnInterrupted it waits for) and a second signal. An error
                // means the turn ended by itself meanwhile.
                let runtime = runtime.clone();
                let (thread_id, turn_id) = (thread_id.clone(), turn_id.clone());
                tokio::spawn(async move {
                    if let Err(error) = runtime.interrupt_turn(&thread_id, &turn_id).await {
                        tracing::debug!("interrupting turn {turn_id}: {error:#}");
                    }
                });
            }
        }
    };
    progress.finish();
    if !args.json {
        eprintln!(
            "roder: thread {thread_id} (continue with: roder exec --thread {thread_id} \"…\")"
        );
    }
    let code = match ending {
        Ending::Completed(answer, incomplete) => {
            if !args.json {
                let mut stdout = crate::stdout::tokio();
                stdout.write_all(answer.as_bytes()).await?;
                if !answer.ends_with('\n') {
                    stdout.write_all(b"\n").await?;
                }
                stdout.flush().await?;
            }
            match incomplete {
                Some(incomplete) => {
                    eprintln!("roder: incomplete answer: {}", incomplete.describe());
                    ExitCode::from(EXIT_INCOMPLETE)
                }
                None => ExitCode::SUCCESS,
            }
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
    };
    // A signalled run says so, however the race with the turn's end went.
    Ok(stopped_by.map_or(code, |signal| ExitCode::from(signal.exit_code())))
}

/// Whether `start_turn` refused because the thread is busy: a turn running
/// in this process, or another process holding the thread's writer lease.
fn is_busy(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<ThreadWriterBusy>().is_some()
            || matches!(
                cause.downcast_ref::<RuntimeError>(),
                Some(RuntimeError::ThreadBusy { .. })
            )
    })
}

/// A signal that stops a turn the way Ctrl-C does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopSignal {
    Interrupt,
    Terminate,
    Hangup,
}

impl StopSignal {
    /// 128 + the signal's number, as a shell reports a process it killed.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
            StopSignal::Hangup => 129,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP, caught from registration on (a signal that
/// arrives before [`StopSignals::recv`] is kept, not lost).
pub(crate) struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl StopSignals {
    pub(crate) fn register() -> anyhow::Result<Self> {
        let register = |kind: SignalKind, name: &str| {
            signal(kind)
                .map_err(|error| anyhow::anyhow!("could not install the {name} handler: {error}"))
        };
        Ok(Self {
            interrupt: register(SignalKind::interrupt(), "SIGINT")?,
            terminate: register(SignalKind::terminate(), "SIGTERM")?,
            hangup: register(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    /// The next stop signal. Cancel-safe.
    pub(crate) async fn recv(&mut self) -> StopSignal {
        // `recv` yields `None` only if the driver is gone; never wake then.
        async fn next(signal: &mut Signal, which: StopSignal) -> StopSignal {
            match signal.recv().await {
                Some(()) => which,
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            signal = next(&mut self.interrupt, StopSignal::Interrupt) => signal,
            signal = next(&mut self.terminate, StopSignal::Terminate) => signal,
            signal = next(&mut self.hangup, StopSignal::Hangup) => signal,
        }
    }

    /// A stop signal that already arrived, without waiting.
    async fn pending(&mut self) -> Option<StopSignal> {
        tokio::select! {
            biased;
            signal = self.recv() => Some(signal),
            () = std::future::ready(()) => None,
        }
    }
}

/// Shows events not seen yet; returns how turn `turn_id` ended once it has.
/// Events of an earlier turn are shown but end nothing: starting a turn
/// first closes one a killed process left open, and that old turn's
/// `TurnFailed` arrives on the same thread.
async fn show(
    progress: &mut Progress,
    last_seq: &mut u64,
    turn_id: &str,
    batch: Vec<EventEnvelope>,
) -> anyhow::Result<Option<Ending>> {
    for envelope in batch {
        // Transient deltas repeat the seq of the persisted event before them.
        if envelope.event.is_transient() {
            if envelope.seq >= *last_seq {
                progress.event(&envelope).await?;
            }
            continue;
        }
        if envelope.seq <= *last_seq {
            continue;
        }
        *last_seq = envelope.seq;
        let ending = progress.event(&envelope).await?;
        if envelope.turn_id.as_deref() == Some(turn_id)
            && let Some(ending) = ending
        {
            return Ok(Some(ending));
        }
    }
    Ok(None)
}

/// The provider a new thread's first turn calls: `--model`'s, else the
/// profile's `model`, else the configured one (whose key is checked before
/// anything is made).
pub(crate) fn provider_of<'a>(
    settings: &'a Settings,
    profile: Option<&'a ProfileSnapshot>,
) -> &'a str {
    match profile.and_then(|profile| profile.model.as_deref()) {
        Some(label) if settings.model_source != "--model" => label
            .split_once('/')
            .map_or(label, |(provider, _)| provider),
        _ => settings.model.provider.as_str(),
    }
}

pub(crate) async fn create_thread(
    runtime: &Runtime,
    settings: &Settings,
    args: &ExecArgs,
    workspace: &std::path::Path,
    profile: Option<ProfileSnapshot>,
) -> anyhow::Result<String> {
    let mut request = CreateThreadRequest::in_workspace(workspace.display().to_string());
    // A profile's runner is applied by the runtime (`--runner` wins).
    if let Some(name) = &args.runner {
        request.runner = Some(runner_selection(settings, name)?);
    }
    let Some(profile) = profile else {
        return Ok(runtime.create_thread_with(request).await?.thread_id);
    };
    let approvals = flags_over_profile(settings, args, &mut request);
    Ok(runtime
        .create_thread_with_profile(request, None, approvals, profile)
        .await?
        .thread_id)
}

/// What `roder exec`'s flags set over a profile in a new thread (the
/// runtime records each override): `--model` in `request`, `--mode` in the
/// approvals returned.
pub(crate) fn flags_over_profile(
    settings: &Settings,
    args: &ExecArgs,
    request: &mut CreateThreadRequest,
) -> roder_api::approval::ThreadApprovals {
    if settings.model_source == "--model" {
        request.provider = Some(settings.model.provider.clone());
        request.model = Some(settings.model.model.clone());
    }
    roder_api::approval::ThreadApprovals {
        mode: args.mode,
        ..Default::default()
    }
}

/// The profile snapshot stored with `thread_id`, if it has one (nothing if
/// the thread does not exist: the turn then says so).
async fn stored_profile(
    settings: &Settings,
    thread_id: &str,
) -> anyhow::Result<Option<ProfileSnapshot>> {
    let store = crate::config::store::factory(settings)?.open()?;
    Ok(store
        .load_metadata(thread_id)
        .await?
        .and_then(|metadata| metadata.profile.map(|profile| *profile)))
}

/// The settings with the profile's MCP servers added (a name that
/// `config.toml` already uses is an error, not a silent choice).
fn profile_mcp_servers(settings: &Settings, profile: &ProfileSnapshot) -> anyhow::Result<Settings> {
    let mut entries = std::collections::BTreeMap::new();
    for (name, server) in &profile.mcp_servers {
        if settings.mcp_servers.iter().any(|known| &known.name == name) {
            anyhow::bail!(
                "profile {} declares mcp_servers.{name}, which config.toml also declares; rename one",
                profile.canonical
            );
        }
        let entry: crate::config::mcp_servers::McpServerEntry =
            serde_json::from_value(serde_json::to_value(server)?).map_err(|error| {
                anyhow::anyhow!("profile {} mcp_servers.{name}: {error}", profile.canonical)
            })?;
        entries.insert(name.clone(), entry);
    }
    let mut settings = settings.clone();
    settings.mcp_servers.extend(
        crate::config::mcp_servers::servers(&entries)
            .map_err(|error| anyhow::anyhow!("profile {}: {error}", profile.canonical))?,
    );
    Ok(settings)
}

/// The runner configured as `[runners.NAME]`, for a new thread (`roder
/// exec --runner`, `roder acp --runner`).
pub(crate) fn runner_selection(
    settings: &Settings,
    name: &str,
) -> anyhow::Result<ThreadRunnerSelection> {
    let entry = settings.runners.get(name).ok_or_else(|| {
        anyhow::anyhow!(
            "runner \"{name}\" is not configured (configured: {}); add a [runners.{name}] table with provider and config",
            settings.runners.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    Ok(ThreadRunnerSelection {
        provider_id: entry.provider.clone(),
        config: serde_json::to_value(&entry.config)?,
        workspace: runner_workspace(name, entry)?.display().to_string(),
        read_roots: Vec::new(),
    })
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
            let mut stdout = crate::stdout::tokio();
            stdout.write_all(line.as_bytes()).await?;
            stdout.flush().await?;
        }
        Ok(self.handle(&envelope.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::writer_lease::WriterIdentity;

    #[test]
    fn busy_threads_are_recognised_through_context() {
        let elsewhere = anyhow::Error::new(ThreadWriterBusy {
            thread_id: "t1".into(),
            holder: WriterIdentity::new("other", 99, "box"),
        })
        .context("starting a turn");
        assert!(is_busy(&elsewhere));
        let here = anyhow::Error::new(RuntimeError::ThreadBusy {
            thread_id: "t1".into(),
            turn_id: "u1".into(),
        });
        assert!(is_busy(&here));
        let other = anyhow::Error::new(RuntimeError::TurnNotRunning {
            thread_id: "t1".into(),
            turn_id: "u1".into(),
        });
        assert!(!is_busy(&other));
        assert!(!is_busy(&anyhow::anyhow!("thread is busy")));
    }

    #[test]
    fn stop_signals_exit_with_128_plus_their_number() {
        assert_eq!(StopSignal::Interrupt.exit_code(), 128 + 2);
        assert_eq!(StopSignal::Hangup.exit_code(), 128 + 1);
        assert_eq!(StopSignal::Terminate.exit_code(), 128 + 15);
    }
}
