//! `provision`, figures `fork_docker_p50_ms` and `rollback_docker_p50_ms`:
//! what forking a docker thread from a checkpoint and rolling one back
//! cost, at the checkpointer (`DockerCheckpointer`), on the default
//! (confined) sandbox: the workspace is a tmpfs volume of 200 small files.
//!
//! A fork is `DockerCheckpointer::fork` plus the fork's first session:
//! `create_session` of the fork's config, which creates and starts a
//! container of the checkpoint image and copies the saved workspace into
//! its volume, ready for commands. Its baseline, in the same run and
//! interleaved with it, is a cold `create_session` of the source's config
//! (create + start of `roder-sandbox:latest`, no pool). A rollback is
//! `restore` after a turn that edited, created and deleted 10 files each.
//! The checkpoint itself (one container commit) is reported as context.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use bollard::Docker;
use bollard::query_parameters::{
    ListContainersOptionsBuilder, RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder,
};
use roder_api::checkpoint::{
    CheckpointRequest, CheckpointWorkspace, ForkedWorkspace, WorkspaceCheckpointer,
};
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerCommandRequest, RunnerDestination,
    RunnerManifest, ThreadRunnerBinding,
};
use roder_ext_runner_docker::{DockerCheckpointer, DockerRunnerProvider, PROVIDER_ID};
use serde_json::{Value, json};

use crate::figure::{median, print, sized};

const IMAGE: &str = "roder-sandbox:latest";
fn samples() -> usize {
    sized(10, 2)
}

fn files() -> usize {
    sized(200, 120)
}

const LABEL: &str = "roder-bench";

pub async fn run() -> anyhow::Result<()> {
    if !roder_ext_runner_docker::daemon_socket_present() {
        eprintln!("provision: no Docker daemon socket; fork_docker_p50_ms skipped");
        return Ok(());
    }
    let provider = Arc::new(DockerRunnerProvider::connect()?);
    let docker = provider.docker().await?;
    docker.inspect_image(IMAGE).await.with_context(|| {
        format!("image {IMAGE} is missing; run scripts/build-sandbox-image.sh first")
    })?;
    let run_id = format!("fork-{}", std::process::id());
    let mut images = Vec::new();
    let measured = measure(&provider, &run_id, &mut images).await;
    let cleaned = cleanup(&docker, &run_id, &images).await;
    measured?;
    cleaned
}

fn destination(id: &str, config: &Value) -> RunnerDestination {
    RunnerDestination {
        id: id.to_string(),
        provider_id: PROVIDER_ID.to_string(),
        config: config.clone(),
        default_manifest: RunnerManifest::default(),
    }
}

fn sh(script: &str) -> RunnerCommandRequest {
    RunnerCommandRequest {
        command_id: format!("bench-{}", script.len()),
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: None,
        env: Vec::new(),
        timeout_ms: Some(60_000),
    }
}

async fn run_ok(session: &dyn RemoteRunnerSession, script: &str) -> anyhow::Result<String> {
    let result = session.run_command(sh(script)).await?;
    anyhow::ensure!(
        result.exit_code == Some(0),
        "`{script}` failed: {}",
        result.stderr
    );
    Ok(result.stdout)
}

async fn measure(
    provider: &Arc<DockerRunnerProvider>,
    run_id: &str,
    images: &mut Vec<String>,
) -> anyhow::Result<()> {
    let checkpointer = DockerCheckpointer::new(provider.clone());
    let config = json!({
        "image": IMAGE,
        "labels": {LABEL: run_id},
        "checkpoints": "per_turn",
        "workspace": "/workspace",
    });
    let source_destination = destination("thread-bench-fork-source", &config);
    let source = provider.create_session(source_destination.clone()).await?;
    run_ok(
        source.as_ref(),
        &format!(
            "mkdir -p d && for i in $(seq 1 {}); do echo \"file $i\" > d/f$i.txt; done",
            files()
        ),
    )
    .await?;
    let workspace = CheckpointWorkspace::Runner {
        binding: Box::new(ThreadRunnerBinding {
            destination: source_destination,
            workspace: "/workspace".into(),
            read_roots: Vec::new(),
        }),
        state: Some(Box::new(source.state())),
    };
    let started = Instant::now();
    let checkpoint = checkpointer
        .checkpoint(CheckpointRequest {
            thread_id: "bench-fork-source",
            turn_id: "turn-2",
            workspace: &workspace,
        })
        .await?
        .context("no checkpoint")?;
    let checkpoint_ms = started.elapsed().as_secs_f64() * 1000.0;
    images.push(checkpoint.id.clone());

    let mut cold = Vec::with_capacity(samples());
    let mut forks = Vec::with_capacity(samples());
    // One of each unmeasured (caches), then interleaved samples.
    for index in 0..=samples() {
        let started = Instant::now();
        let session = provider
            .create_session(destination(&format!("thread-bench-cold-{index}"), &config))
            .await?;
        let cold_ms = started.elapsed().as_secs_f64() * 1000.0;
        session.close().await?;

        let started = Instant::now();
        let forked = checkpointer.fork(&workspace, &checkpoint).await?;
        let ForkedWorkspace::Runner {
            config: fork_config,
            ..
        } = &forked
        else {
            anyhow::bail!("a docker thread forks into a docker workspace");
        };
        let session = provider
            .create_session(destination(
                &format!("thread-bench-fork-{index}"),
                fork_config,
            ))
            .await?;
        let fork_ms = started.elapsed().as_secs_f64() * 1000.0;
        if index == 0 {
            let count = run_ok(session.as_ref(), "ls d | wc -l").await?;
            anyhow::ensure!(
                count.trim() == files().to_string(),
                "the fork has {} files, not {}",
                count.trim(),
                files()
            );
        } else {
            cold.push(cold_ms);
            forks.push(fork_ms);
        }
        session.close().await?;
    }

    let mut rollbacks = Vec::with_capacity(samples());
    for index in 0..samples() {
        run_ok(
            source.as_ref(),
            &format!(
                "for i in $(seq 1 10); do echo edited > d/f$i.txt; echo new > d/new{index}-$i.txt; \
                 rm d/f$((i + 100)).txt; done"
            ),
        )
        .await?;
        let started = Instant::now();
        checkpointer.restore(&workspace, &checkpoint).await?;
        rollbacks.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let check = run_ok(source.as_ref(), "ls d | wc -l; cat d/f1.txt").await?;
    anyhow::ensure!(
        check == format!("{}\nfile 1\n", files()),
        "the rollback did not restore the files: {check}"
    );
    source.close().await?;

    let cold_p50 = median(&mut cold);
    let fork_p50 = median(&mut forks);
    print(
        "provision",
        "fork_docker_p50_ms",
        fork_p50,
        "ms",
        json!({
            "files": files(),
            "samples": samples(),
            "image": IMAGE,
            "what": "DockerCheckpointer::fork + create_session of the fork (a started container of the checkpoint image, saved workspace copied into its volume)",
            "cold_container_p50_ms": cold_p50,
            "ratio_to_cold_container": if cold_p50 > 0.0 { fork_p50 / cold_p50 } else { 0.0 },
            "checkpoint_commit_ms": checkpoint_ms,
        }),
    );
    let rollback_p50 = median(&mut rollbacks);
    print(
        "provision",
        "rollback_docker_p50_ms",
        rollback_p50,
        "ms",
        json!({
            "files": files(),
            "samples": samples(),
            "changes_undone": 30,
            "what": "DockerCheckpointer::restore: the workspace emptied and refilled from the checkpoint image",
        }),
    );
    Ok(())
}

/// Removes this run's containers, then its checkpoint images.
async fn cleanup(docker: &Docker, run_id: &str, images: &[String]) -> anyhow::Result<()> {
    let filters = HashMap::from([("label", vec![format!("{LABEL}={run_id}")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    for summary in docker.list_containers(Some(options)).await? {
        if let Some(id) = summary.id {
            let options = RemoveContainerOptionsBuilder::default()
                .force(true)
                .v(true)
                .build();
            docker.remove_container(&id, Some(options)).await?;
        }
    }
    for image in images {
        let options = RemoveImageOptionsBuilder::default().force(true).build();
        docker.remove_image(image, Some(options), None).await?;
    }
    Ok(())
}
