//! Shared set-up of the docker runner's integration tests, which talk to the
//! real daemon.
//!
//! A test skips (loudly) only when there is no daemon socket at all. A
//! missing sandbox image is a failure: CI builds it with
//! `scripts/build-sandbox-image.sh`, and a skipped test proves nothing.
//! Every container a test creates carries a `roder-test` label unique to
//! the test, and [`TestLabel`] removes them all when dropped, so a failing
//! test does not leak containers (and `gc` can remove any a crash leaves).

#![allow(dead_code)]

pub mod runtime;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerCommandRequest, RunnerCommandResult,
    RunnerDestination, RunnerManifest,
};
use roder_ext_runner_docker::{DockerRunnerProvider, PROVIDER_ID};
use serde_json::{Value, json};

/// The image `scripts/build-sandbox-image.sh` builds.
pub const IMAGE: &str = "roder-sandbox:latest";

/// The label key tests mark their containers with.
pub const TEST_LABEL: &str = "roder-test";

/// A provider over the local daemon, or `None` (with a loud note) when no
/// daemon socket exists. Panics when the sandbox image is missing.
pub async fn provider(test: &str) -> Option<DockerRunnerProvider> {
    if !roder_ext_runner_docker::daemon_socket_present() {
        eprintln!(
            "\n!!! SKIPPING {test}: no Docker daemon socket at {} and DOCKER_HOST is unset !!!\n",
            roder_ext_runner_docker::DEFAULT_SOCKET
        );
        return None;
    }
    let provider = DockerRunnerProvider::connect().expect("docker client");
    let docker = provider.docker().await.expect("the Docker daemon answers");
    if docker.inspect_image(IMAGE).await.is_err() {
        panic!(
            "the test image {IMAGE} is missing: run scripts/build-sandbox-image.sh (CI runs it before the tests)"
        );
    }
    Some(provider)
}

/// A unique label value for one test's containers; removes them on drop.
pub struct TestLabel {
    pub value: String,
    docker: Docker,
}

impl TestLabel {
    pub async fn new(provider: &DockerRunnerProvider) -> Self {
        Self {
            value: uuid::Uuid::new_v4().simple().to_string(),
            docker: provider.docker().await.unwrap(),
        }
    }

    /// A destination config for the sandbox image with this label, plus
    /// `extra` fields.
    pub fn config(&self, extra: Value) -> Value {
        let mut config = json!({
            "image": IMAGE,
            "labels": {TEST_LABEL: self.value},
        });
        if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
            config.extend(extra);
        }
        config
    }

    /// Ids of this test's containers (any state).
    pub async fn containers(&self) -> Vec<String> {
        containers_labelled(&self.docker, &format!("{TEST_LABEL}={}", self.value)).await
    }
}

impl Drop for TestLabel {
    fn drop(&mut self) {
        let docker = self.docker.clone();
        let filter = format!("{TEST_LABEL}={}", self.value);
        // Drop runs inside the test's runtime, which is about to shut down:
        // clean up on a runtime of our own, on another thread.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                for id in containers_labelled(&docker, &filter).await {
                    let options = RemoveContainerOptionsBuilder::default()
                        .force(true)
                        .v(true)
                        .build();
                    let _ = docker.remove_container(&id, Some(options)).await;
                }
            });
        })
        .join();
    }
}

/// Ids of containers carrying `label` (`key=value`), in any state.
pub async fn containers_labelled(docker: &Docker, label: &str) -> Vec<String> {
    let filters = HashMap::from([("label", vec![label.to_string()])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|summary| summary.id)
        .collect()
}

pub fn destination(id: &str, config: Value) -> RunnerDestination {
    RunnerDestination {
        id: id.to_string(),
        provider_id: PROVIDER_ID.to_string(),
        config,
        default_manifest: RunnerManifest::default(),
    }
}

pub async fn session(
    provider: &DockerRunnerProvider,
    id: &str,
    config: Value,
) -> Arc<dyn RemoteRunnerSession> {
    provider
        .create_session(destination(id, config))
        .await
        .unwrap()
}

/// A command request for `sh -c script`.
pub fn sh(script: &str) -> RunnerCommandRequest {
    RunnerCommandRequest {
        command_id: uuid::Uuid::new_v4().to_string(),
        program: "sh".to_string(),
        args: vec!["-c".to_string(), script.to_string()],
        cwd: None,
        env: Vec::new(),
        timeout_ms: Some(30_000),
    }
}

pub async fn run(session: &dyn RemoteRunnerSession, script: &str) -> RunnerCommandResult {
    session.run_command(sh(script)).await.unwrap()
}

/// Polls `check` until it holds, for at most `within` (for container state
/// Docker announces no event for).
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = Duration::from_millis(5);
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what} did not happen within {within:?}"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}
