//! Shared set-up of the CLI's docker end-to-end tests: running the real
//! `roder` binary, and the containers a test makes, which carry a
//! `roder-test` label unique to the run and are all removed when the guard
//! drops, however the test ends.

#![allow(dead_code)]

use std::collections::HashMap;

use roder_ext_runner_docker::DockerRunnerProvider;
use roder_ext_runner_docker::bollard::Docker;
use roder_ext_runner_docker::bollard::query_parameters::{
    ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};

pub const IMAGE: &str = "roder-sandbox:latest";
pub const TEST_LABEL: &str = "roder-test";

/// Removes every container labelled with this run's label when dropped.
pub struct Containers {
    docker: Docker,
    pub label: String,
}

impl Containers {
    /// This run's containers (any state): id → labels.
    pub async fn list(&self) -> HashMap<String, HashMap<String, String>> {
        list_labelled(&self.docker, &self.label).await
    }

    /// Whether the daemon reports container `id` paused.
    pub async fn is_paused(&self, id: &str) -> bool {
        self.docker
            .inspect_container(id, None)
            .await
            .unwrap()
            .state
            .and_then(|state| state.paused)
            .unwrap_or(false)
    }
}

async fn list_labelled(docker: &Docker, label: &str) -> HashMap<String, HashMap<String, String>> {
    let filters = HashMap::from([("label", vec![format!("{TEST_LABEL}={label}")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|summary| Some((summary.id?, summary.labels.unwrap_or_default())))
        .collect()
}

impl Drop for Containers {
    fn drop(&mut self) {
        let docker = self.docker.clone();
        let label = self.label.clone();
        // The test's runtime is shutting down: clean up on a runtime of our
        // own, on another thread.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                for id in list_labelled(&docker, &label).await.into_keys() {
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

/// The guard over this run's containers, or `None` (with a loud note) when
/// there is no Docker daemon socket. Panics when the sandbox image is
/// missing: a skipped test proves nothing.
pub async fn docker_or_skip(test: &str) -> Option<Containers> {
    if !roder_ext_runner_docker::daemon_socket_present() {
        eprintln!(
            "\n!!! SKIPPING {test}: no Docker daemon socket at {} and DOCKER_HOST is unset !!!\n",
            roder_ext_runner_docker::DEFAULT_SOCKET
        );
        return None;
    }
    let docker = DockerRunnerProvider::connect()
        .unwrap()
        .docker()
        .await
        .expect("the Docker daemon answers");
    assert!(
        docker.inspect_image(IMAGE).await.is_ok(),
        "the test image {IMAGE} is missing: run scripts/build-sandbox-image.sh"
    );
    Some(Containers {
        docker,
        label: format!("cli-e2e-{}-{}", std::process::id(), unique_suffix()),
    })
}

/// A suffix that keeps two runs' labels apart.
fn unique_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default()
}

/// A home whose model is `server` (openai-chat, key `FAKE_MODEL_KEY`) and
/// whose `[runners.box]` is docker with `config` (a TOML inline table's
/// body) plus this run's label.
pub fn home_with_docker_runner(
    server_url: &str,
    containers: &Containers,
    config: &str,
) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/test-model\"\n\n\
             [providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{server_url}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n\n\
             [runners.box]\nprovider = \"docker\"\n\
             config = {{ image = \"{IMAGE}\", {config}, labels = {{ \"{TEST_LABEL}\" = \"{}\" }} }}\n",
            containers.label
        ),
    )
    .unwrap();
    home
}
