//! `provision`: how long a runner takes to hand a new thread a session.
//!
//! Docker: a cold `create_session` (create + start a labelled container),
//! a warm one (claimed from a full warm pool), and as the baseline a bare
//! Engine API create + start of the same image measured in the same run
//! (what `docker run -d` does), so the cold figure reads as a ratio on a
//! shared, noisy machine. When the `docker` CLI is installed its `docker run
//! -d` is timed too, as context only.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use roder_api::remote_runner::{RemoteRunnerProvider, RunnerDestination, RunnerManifest};
use roder_ext_runner_docker::DockerRunnerProvider;
use serde_json::{Value, json};

use crate::figure::{median, percentile, print, sized};

/// The image `scripts/build-sandbox-image.sh` builds.
const IMAGE: &str = "roder-sandbox:latest";
/// Samples per docker figure.
fn samples() -> usize {
    sized(20, 2)
}

/// Cold creates run first and thrown away (image and daemon caches).
const WARM_UP: usize = 2;
/// Warm pool size: the pool is full again before every warm sample.
const POOL_SIZE: usize = 2;
/// Samples of the `docker` CLI, which is only context.
fn cli_sample_count() -> usize {
    sized(5, 1)
}

/// Label marking this run's containers, so they are all removed at the end.
pub(crate) const BENCH_LABEL: &str = "roder-bench";
/// The main process the provider gives its containers, for a like-for-like
/// baseline.
const KEEPALIVE: &str = "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done";

pub async fn run() -> anyhow::Result<()> {
    crate::provision_worktree::worktree()
        .await
        .context("worktree")?;
    crate::provision_checkpoint::run()
        .await
        .context("checkpoint")?;
    docker().await.context("docker")?;
    crate::provision_docker_exec::run()
        .await
        .context("docker exec")
}

/// The docker figures: `docker_cold_p50_ms`, `docker_run_p50_ms`,
/// `docker_cold_ratio_to_run`, `docker_warm_p50_ms`, `docker_warm_p95_ms`.
pub async fn docker() -> anyhow::Result<()> {
    if !roder_ext_runner_docker::daemon_socket_present() {
        eprintln!(
            "provision: no Docker daemon socket at {} (and DOCKER_HOST unset); docker figures skipped",
            roder_ext_runner_docker::DEFAULT_SOCKET
        );
        return Ok(());
    }
    let provider = DockerRunnerProvider::connect()?;
    let docker = provider.docker().await?;
    docker.inspect_image(IMAGE).await.with_context(|| {
        format!("image {IMAGE} is missing; run scripts/build-sandbox-image.sh first")
    })?;
    let run_id = uuid_like();
    let measured = measure(&provider, &docker, &run_id).await;
    let shutdown = provider.shutdown_pool().await;
    let cleanup = remove_labelled(&docker, &run_id).await;
    let figures = measured?;
    shutdown?;
    cleanup?;
    figures.print();
    Ok(())
}

struct Figures {
    cold: Vec<f64>,
    run: Vec<f64>,
    warm: Vec<f64>,
    cli: Option<Vec<f64>>,
}

impl Figures {
    fn print(mut self) {
        let cold_p95 = percentile(&mut self.cold, 0.95);
        let cold = median(&mut self.cold);
        let run_p95 = percentile(&mut self.run, 0.95);
        let run = median(&mut self.run);
        let warm_p95 = percentile(&mut self.warm, 0.95);
        let warm = median(&mut self.warm);
        let cli = self.cli.as_mut().map(|samples| median(samples));
        let context = json!({
            "provider": "docker",
            "image": IMAGE,
            "samples": samples(),
            "network": "none",
        });
        let with = |extra: Value| {
            let mut merged = context.clone();
            if let (Some(merged), Value::Object(extra)) = (merged.as_object_mut(), extra) {
                merged.extend(extra);
            }
            merged
        };
        print(
            "provision",
            "docker_cold_p50_ms",
            cold,
            "ms",
            with(
                json!({"p95_ms": round(cold_p95), "what": "create_session without a pool: create + start a labelled container"}),
            ),
        );
        print(
            "provision",
            "docker_run_p50_ms",
            run,
            "ms",
            with(json!({
                "p95_ms": round(run_p95),
                "what": "baseline: Engine API create + start of the same image (docker run -d)",
                "docker_cli_run_p50_ms": cli.map(round),
                "docker_cli_samples": cli.map(|_| cli_sample_count()),
            })),
        );
        print(
            "provision",
            "docker_cold_ratio_to_run",
            if run > 0.0 { cold / run } else { 0.0 },
            "ratio",
            with(json!({"cold_p50_ms": round(cold), "run_p50_ms": round(run)})),
        );
        print(
            "provision",
            "docker_warm_p50_ms",
            warm,
            "ms",
            with(
                json!({"pool_size": POOL_SIZE, "what": "create_session claiming a started container from a full warm pool"}),
            ),
        );
        print(
            "provision",
            "docker_warm_p95_ms",
            warm_p95,
            "ms",
            with(json!({"pool_size": POOL_SIZE})),
        );
    }
}

async fn measure(
    provider: &DockerRunnerProvider,
    docker: &Docker,
    run_id: &str,
) -> anyhow::Result<Figures> {
    let cold_config = json!({"image": IMAGE, "labels": {BENCH_LABEL: run_id}});
    let warm_config =
        json!({"image": IMAGE, "labels": {BENCH_LABEL: run_id}, "pool_size": POOL_SIZE});
    for index in 0..WARM_UP {
        cold_sample(provider, &cold_config, &format!("warmup-{index}")).await?;
    }
    let mut cold = Vec::with_capacity(samples());
    let mut run = Vec::with_capacity(samples());
    // Interleaved, so drift on a shared machine hits both alike.
    for index in 0..samples() {
        cold.push(cold_sample(provider, &cold_config, &format!("cold-{index}")).await?);
        run.push(run_sample(docker, run_id).await?);
    }
    let mut warm = Vec::with_capacity(samples());
    let pooled = destination("bench-pool", &warm_config);
    for index in 0..samples() {
        provider.prewarm(&pooled).await?;
        let started = Instant::now();
        let session = provider
            .create_session(destination(
                &format!("thread-bench-warm-{index}"),
                &warm_config,
            ))
            .await?;
        warm.push(ms(started.elapsed()));
        session.close().await?;
    }
    Ok(Figures {
        cold,
        run,
        warm,
        cli: cli_samples(run_id).await,
    })
}

fn destination(id: &str, config: &Value) -> RunnerDestination {
    RunnerDestination {
        id: id.to_string(),
        provider_id: roder_ext_runner_docker::PROVIDER_ID.to_string(),
        config: config.clone(),
        default_manifest: RunnerManifest::default(),
    }
}

/// One cold `create_session`; the removal after it is not timed.
async fn cold_sample(
    provider: &DockerRunnerProvider,
    config: &Value,
    name: &str,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let session = provider
        .create_session(destination(&format!("thread-bench-{name}"), config))
        .await?;
    let elapsed = ms(started.elapsed());
    session.close().await?;
    Ok(elapsed)
}

/// One bare create + start through the Engine API, like `docker run -d`.
async fn run_sample(docker: &Docker, run_id: &str) -> anyhow::Result<f64> {
    let body = ContainerCreateBody {
        image: Some(IMAGE.to_string()),
        entrypoint: Some(vec!["/bin/sh".into(), "-c".into(), KEEPALIVE.into()]),
        labels: Some(HashMap::from([(
            BENCH_LABEL.to_string(),
            run_id.to_string(),
        )])),
        host_config: Some(HostConfig {
            network_mode: Some("none".to_string()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let started = Instant::now();
    let created = docker.create_container(None, body).await?;
    docker.start_container(&created.id, None).await?;
    let elapsed = ms(started.elapsed());
    remove(docker, &created.id).await?;
    Ok(elapsed)
}

/// `docker run -d` through the CLI, when it is installed (context only).
async fn cli_samples(run_id: &str) -> Option<Vec<f64>> {
    let mut samples = Vec::with_capacity(cli_sample_count());
    for _ in 0..cli_sample_count() {
        let started = Instant::now();
        let output = tokio::process::Command::new("docker")
            .args(["run", "-d", "--network", "none", "--label"])
            .arg(format!("{BENCH_LABEL}={run_id}"))
            .args(["--entrypoint", "/bin/sh", IMAGE, "-c", KEEPALIVE])
            .output()
            .await
            .ok()?;
        if !output.status.success() {
            return None;
        }
        samples.push(ms(started.elapsed()));
    }
    Some(samples)
}

async fn remove(docker: &Docker, id: &str) -> anyhow::Result<()> {
    let options = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    docker.remove_container(id, Some(options)).await?;
    Ok(())
}

/// Removes every container of this run (also after a failure).
pub(crate) async fn remove_labelled(docker: &Docker, run_id: &str) -> anyhow::Result<()> {
    let filters = HashMap::from([("label", vec![format!("{BENCH_LABEL}={run_id}")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    for summary in docker.list_containers(Some(options)).await? {
        if let Some(id) = summary.id {
            remove(docker, &id).await?;
        }
    }
    Ok(())
}

pub(crate) fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
}

pub(crate) fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// A run id without pulling in a uuid dependency here.
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or(0);
    format!("{nanos:x}-{}", std::process::id())
}
