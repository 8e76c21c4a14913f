//! `provision`, the figures of tool calls in a docker session:
//!
//! * `docker_exec_p50_ms`: one `exec_command` of `true` through the runtime
//!   (a scripted engine, the builtin tools, the runner session and its
//!   sandbox executor), measured as (a turn of [`calls()`] calls − a turn of
//!   none) / [`calls()`], so the turn's fixed costs cancel;
//! * `docker_engine_exec_p50_ms`, the baseline: a raw Engine API exec of
//!   `true` (create, start attached, read to the end, inspect) in the same
//!   container, in the same run;
//! * `docker_exec_plain_p50_ms`, context: the same calls with the
//!   destination's `"executor": "off"` (one Engine API exec per call);
//! * `docker_file_rw_p50_ms`: a 4 KiB `write_file` then a `read_file` of it,
//!   through the runtime, per pair;
//! * `docker_resume_p50_ms`: the first turn with one `exec_command` in a new
//!   runtime (a new provider: a new process's view) of a thread whose
//!   container `on_idle` paused: rejoin, unpause, a new helper, the call;
//! * `docker_copy_in_1000_files_ms`: what a 1,000-file manifest entry adds
//!   to `create_session` (with the entry − without, interleaved), against
//!   one raw Engine API archive upload of a tar of the same tree (packed
//!   beforehand, untimed) into a fresh container of the same image.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures::StreamExt;
use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::extension::ExtensionRegistryBuilder;
use roder_core::{
    CreateThreadRequest, Runtime, RuntimeConfig, StartTurnRequest, ThreadRunnerSelection,
};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_ext_runner_docker::DockerRunnerProvider;
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::figure::{median, print, sized};
use crate::provision::{BENCH_LABEL, ms, remove_labelled, round};

const IMAGE: &str = "roder-sandbox:latest";
/// Tool calls in a measured turn.
fn calls() -> usize {
    sized(20, 2)
}

/// Measured turns per figure.
fn repeats() -> usize {
    sized(10, 1)
}

/// Raw Engine API execs for the baseline.
fn engine_samples() -> usize {
    sized(30, 2)
}

/// Pause-and-resume rounds.
fn resumes() -> usize {
    sized(8, 1)
}

/// Samples of the manifest copy-in.
fn copy_samples() -> usize {
    sized(8, 1)
}

/// Files in the copied tree.
fn copy_files() -> usize {
    sized(1000, 10)
}

pub async fn run() -> anyhow::Result<()> {
    if !roder_ext_runner_docker::daemon_socket_present() {
        eprintln!("provision: no Docker daemon socket; docker exec figures skipped");
        return Ok(());
    }
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let store = tempfile::tempdir()?;
    let host = tempfile::tempdir()?;
    let measured = measure(&run_id, store.path(), host.path()).await;
    let docker = DockerRunnerProvider::connect()?.docker().await?;
    let cleanup = remove_labelled(&docker, &run_id).await;
    let figures = measured?;
    cleanup?;
    figures.print();
    Ok(())
}

struct Figures {
    exec: Vec<f64>,
    plain: Vec<f64>,
    engine: Vec<f64>,
    file_rw: Vec<f64>,
    resume: Vec<f64>,
    copy_in: Vec<f64>,
    raw_upload: Vec<f64>,
}

impl Figures {
    fn print(mut self) {
        let exec = median(&mut self.exec);
        let plain = median(&mut self.plain);
        let engine = median(&mut self.engine);
        let file_rw = median(&mut self.file_rw);
        let resume = median(&mut self.resume);
        let copy_in = median(&mut self.copy_in);
        let raw_upload = median(&mut self.raw_upload);
        let ratio = if engine > 0.0 { exec / engine } else { 0.0 };
        print(
            "provision",
            "docker_exec_p50_ms",
            exec,
            "ms",
            json!({
                "what": "exec_command `true` through the runtime in a docker session (sandbox executor); (turn of 20 calls - turn of none) / 20, each on a new thread, p50 of 10",
                "ratio_to_engine_exec": round(ratio),
                "target": "under 5 ms and under a tenth of docker_engine_exec_p50_ms",
            }),
        );
        print(
            "provision",
            "docker_engine_exec_p50_ms",
            engine,
            "ms",
            json!({"what": "baseline: a raw Engine API exec of `true` in the same container (create, start, read to the end, inspect)", "samples": engine_samples()}),
        );
        print(
            "provision",
            "docker_exec_plain_p50_ms",
            plain,
            "ms",
            json!({"what": "context: exec_command `true` through the runtime with \"executor\": \"off\" (one Engine API exec per call)"}),
        );
        print(
            "provision",
            "docker_file_rw_p50_ms",
            file_rw,
            "ms",
            json!({"what": "a 4 KiB write_file then read_file of it through the runtime (one model step with both calls), per pair", "target": "under 3 ms"}),
        );
        print(
            "provision",
            "docker_resume_p50_ms",
            resume,
            "ms",
            json!({"what": "the first turn (one exec_command) in a new runtime of a thread whose container on_idle paused", "samples": resumes(), "target": "under 100 ms"}),
        );
        print(
            "provision",
            "docker_copy_in_1000_files_ms",
            copy_in,
            "ms",
            json!({
                "what": "a 1,000-file manifest entry copied into a new container: create_session with it - without it, p50",
                "raw_archive_upload_p50_ms": round(raw_upload),
                "ratio_to_raw_upload": if raw_upload > 0.0 { round(copy_in / raw_upload) } else { 0.0 },
                "samples": copy_samples(),
            }),
        );
    }
}

struct Bench {
    provider: Arc<DockerRunnerProvider>,
    runtime: Arc<Runtime>,
    engine: Arc<ScriptedEngine>,
    events: broadcast::Receiver<EventEnvelope>,
}

impl Bench {
    fn new(store: &Path, host: &Path) -> anyhow::Result<Self> {
        let engine = ScriptedEngine::new(Vec::new());
        let mut builder = ExtensionRegistryBuilder::new();
        builder.inference_engine(engine.clone());
        builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
            base_path: store.to_path_buf(),
        }));
        builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(host)?);
        let provider = Arc::new(DockerRunnerProvider::connect()?);
        builder.remote_runner_provider(provider.clone());
        let config = RuntimeConfig {
            workspace: Some(host.display().to_string()),
            ..RuntimeConfig::default()
        };
        let runtime = Arc::new(Runtime::new(builder.build()?, config)?);
        let events = runtime.subscribe_events();
        Ok(Self {
            provider,
            runtime,
            engine,
            events,
        })
    }

    async fn thread(&self, host: &Path, config: Value) -> anyhow::Result<String> {
        let mut request = CreateThreadRequest::in_workspace(host.display().to_string());
        request.runner = Some(ThreadRunnerSelection {
            provider_id: roder_ext_runner_docker::PROVIDER_ID.to_string(),
            config,
            workspace: "/workspace".to_string(),
            read_roots: Vec::new(),
        });
        Ok(self.runtime.create_thread_with(request).await?.thread_id)
    }

    /// Runs one turn of `rounds` (then a final answer); its wall time.
    async fn turn(&mut self, thread: &str, rounds: Vec<ScriptedRound>) -> anyhow::Result<f64> {
        let tools = rounds.len();
        for round in rounds {
            self.engine.push_round(round);
        }
        self.engine.push_round(final_round("done"));
        let started = Instant::now();
        self.runtime
            .start_turn(StartTurnRequest::new(thread, "bench"))
            .await?;
        let mut failed_tools = 0;
        loop {
            let envelope = tokio::time::timeout(Duration::from_secs(120), self.events.recv())
                .await
                .context("the turn did not end within 120 s")??;
            if envelope.thread_id != thread {
                continue;
            }
            if let RoderEvent::ToolCallCompleted(call) = &envelope.event
                && call.is_error
            {
                failed_tools += 1;
            }
            if envelope.event.is_terminal() {
                if !matches!(envelope.event, RoderEvent::TurnCompleted(_)) || failed_tools > 0 {
                    bail!(
                        "a bench turn of {tools} tool rounds ended with {:?} ({failed_tools} failed tools)",
                        envelope.event
                    );
                }
                return Ok(ms(started.elapsed()));
            }
        }
    }

    /// Per-call cost of `round` through the runtime: (turn of [`calls()`]
    /// rounds − turn of none) / [`calls()`], [`repeats()`] times, each on a new
    /// thread of `config` (a warm-pool container, its helper started by an
    /// untimed first call), so a sample does not also pay for the history
    /// earlier samples left (every model request carries the transcript).
    async fn per_call(
        &mut self,
        host: &Path,
        config: &Value,
        round: impl Fn(usize) -> Vec<ScriptedRound>,
    ) -> anyhow::Result<Vec<f64>> {
        let mut samples = Vec::with_capacity(repeats());
        for repeat in 0..repeats() {
            let thread = self.thread(host, config.clone()).await?;
            let thread = thread.as_str();
            self.turn(thread, exec_true(0)).await?;
            let empty = self.turn(thread, Vec::new()).await?;
            let rounds = (0..calls())
                .flat_map(|call| round(repeat * calls() + call))
                .collect();
            let full = self.turn(thread, rounds).await?;
            samples.push(((full - empty) / calls() as f64).max(0.0));
        }
        Ok(samples)
    }

    async fn container_of(&self, thread: &str) -> anyhow::Result<String> {
        Ok(self
            .runtime
            .load_thread(thread)
            .await?
            .and_then(|thread| thread.metadata)
            .and_then(|metadata| metadata.runner_state)
            .context("the bench thread has no runner state")?
            .session_id)
    }
}

fn exec_true(index: usize) -> Vec<ScriptedRound> {
    vec![tool_round(&[(
        &format!("x{index}"),
        "exec_command",
        r#"{"cmd": "true"}"#,
    )])]
}

fn write_then_read(index: usize) -> Vec<ScriptedRound> {
    let content = "x".repeat(4095) + "\n";
    let path = format!("rw/{}.txt", index % 8);
    let write = json!({"path": path, "content": content}).to_string();
    let read = json!({"path": path}).to_string();
    // One model step with both calls: the runtime runs a step's workspace
    // calls one at a time, in order.
    vec![tool_round(&[
        (&format!("w{index}"), "write_file", &write),
        (&format!("r{index}"), "read_file", &read),
    ])]
}

async fn measure(run_id: &str, store: &Path, host: &Path) -> anyhow::Result<Figures> {
    let config = |extra: Value| {
        let mut config = json!({"image": IMAGE, "labels": {BENCH_LABEL: run_id}});
        if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
            config.extend(extra);
        }
        config
    };
    let mut bench = Bench::new(store, host)?;
    let pooled = config(json!({"pool_size": 2}));
    let exec = bench.per_call(host, &pooled, exec_true).await?;
    let file_rw = bench.per_call(host, &pooled, write_then_read).await?;
    let thread = bench.thread(host, config(json!({}))).await?;
    bench.turn(&thread, exec_true(0)).await?;
    let container = bench.container_of(&thread).await?;
    let docker = DockerRunnerProvider::connect()?.docker().await?;
    let mut engine = Vec::with_capacity(engine_samples());
    for _ in 0..engine_samples() {
        engine.push(engine_exec(&docker, &container).await?);
    }

    let plain_config = config(json!({"executor": "off", "pool_size": 2}));
    let plain = bench.per_call(host, &plain_config, exec_true).await?;
    // No pool refills behind the cleanup's back.
    bench.provider.shutdown_pool().await?;

    let mut resume = Vec::with_capacity(resumes());
    for _ in 0..resumes() {
        let released = bench.runtime.release_idle_runners().await;
        if released.iter().all(|(_, outcome)| outcome.is_err()) {
            bail!("on_idle paused nothing: {released:?}");
        }
        drop(bench);
        bench = Bench::new(store, host)?;
        resume.push(bench.turn(&thread, exec_true(0)).await?);
    }
    bench.runtime.release_idle_runners().await;
    drop(bench);
    let (copy_in, raw_upload) = copy_in(&docker, &config(json!({}))).await?;
    Ok(Figures {
        copy_in,
        raw_upload,
        exec,
        plain,
        engine,
        file_rw,
        resume,
    })
}

/// A tree of [`copy_files()`] small files in 20 directories.
fn tree(root: &Path) -> anyhow::Result<()> {
    for index in 0..copy_files() {
        let dir = root.join(format!("d{:02}", index % 20));
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join(format!("f{index}.txt")),
            format!("file {index}\n").repeat(8),
        )?;
    }
    Ok(())
}

/// The copy-in samples and the raw-upload baseline, interleaved.
async fn copy_in(docker: &Docker, config: &Value) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    use roder_api::remote_runner::{
        RemoteRunnerProvider, RunnerDestination, RunnerManifest, RunnerManifestEntry,
    };
    let host = tempfile::tempdir()?;
    let source = host.path().join("repo");
    tree(&source)?;
    let tar = {
        let mut builder = tar::Builder::new(Vec::new());
        builder.append_dir_all("repo", &source)?;
        builder.into_inner()?
    };
    let provider = DockerRunnerProvider::connect()?;
    let destination = |index: usize, manifest: RunnerManifest| RunnerDestination {
        id: format!("thread-bench-copy-{index}"),
        provider_id: roder_ext_runner_docker::PROVIDER_ID.to_string(),
        config: config.clone(),
        default_manifest: manifest,
    };
    let manifest = RunnerManifest {
        entries: vec![RunnerManifestEntry {
            source: source.clone(),
            target: "repo".into(),
            writable: true,
        }],
        mounts: Vec::new(),
    };
    let mut copy_in = Vec::with_capacity(copy_samples());
    let mut raw = Vec::with_capacity(copy_samples());
    for index in 0..copy_samples() + 1 {
        let started = Instant::now();
        let bare = provider
            .create_session(destination(index, RunnerManifest::default()))
            .await?;
        let without = ms(started.elapsed());
        let container = bare.state().session_id;
        let started = Instant::now();
        docker
            .upload_to_container(
                &container,
                Some(
                    bollard::query_parameters::UploadToContainerOptionsBuilder::default()
                        .path("/workspace")
                        .build(),
                ),
                bollard::body_full(tar.clone().into()),
            )
            .await?;
        let upload = ms(started.elapsed());
        bare.close().await?;
        let started = Instant::now();
        let with = provider
            .create_session(destination(index, manifest.clone()))
            .await?;
        let with_ms = ms(started.elapsed());
        let check = with
            .run_command(roder_api::remote_runner::RunnerCommandRequest {
                command_id: format!("count-{index}"),
                program: "sh".to_string(),
                args: vec!["-c".to_string(), "find repo -type f | wc -l".to_string()],
                cwd: None,
                env: Vec::new(),
                timeout_ms: Some(30_000),
            })
            .await?;
        with.close().await?;
        if check.stdout.trim() != copy_files().to_string() {
            bail!(
                "the copied tree has {} files, not {}",
                check.stdout.trim(),
                copy_files()
            );
        }
        // The first pair warms caches.
        if index > 0 {
            copy_in.push((with_ms - without).max(0.0));
            raw.push(upload);
        }
    }
    Ok((copy_in, raw))
}

/// One raw Engine API exec of `true`, as the runner's plain path makes it.
async fn engine_exec(docker: &Docker, container: &str) -> anyhow::Result<f64> {
    let started = Instant::now();
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                cmd: Some(vec!["true".to_string()]),
                ..Default::default()
            },
        )
        .await?;
    if let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&created.id, None).await?
    {
        while output.next().await.is_some() {}
    }
    let inspect = docker.inspect_exec(&created.id).await?;
    let elapsed = ms(started.elapsed());
    if inspect.exit_code != Some(0) {
        bail!("the baseline exec of `true` exited {:?}", inspect.exit_code);
    }
    Ok(elapsed)
}
