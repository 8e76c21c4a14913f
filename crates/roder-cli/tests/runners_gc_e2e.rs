//! `roder runners gc` with two Roder homes on one Docker daemon, through the
//! real `roder` binary: each home runs a docker-bound thread whose container
//! is kept after the process exits; gc of one home never removes the other
//! home's container, and removes its own once that thread is deleted.
//!
//! Needs the Docker daemon and `roder-sandbox:latest`
//! (`scripts/build-sandbox-image.sh`). Skips loudly without a daemon socket;
//! a missing image fails. Every container carries a `roder-test` label unique
//! to the run, and a guard removes them all however the test ends.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use roder_ext_runner_docker::bollard::Docker;
use roder_ext_runner_docker::bollard::query_parameters::{
    ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
};
use roder_ext_runner_docker::{DockerRunnerProvider, labels};
use roder_testkit::fake_models::{ChatStream, FakeModelServer};

const IMAGE: &str = "roder-sandbox:latest";
const TEST_LABEL: &str = "roder-test";

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn roder(home: &Path, workspace: &Path, args: &[&str]) -> Run {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
            .args(args)
            .current_dir(workspace)
            .env("RODER_HOME", home)
            .env("FAKE_MODEL_KEY", "test-key")
            .env_remove("RODER_MODEL")
            .output(),
    )
    .await
    .expect("roder should finish within 120 s")
    .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn thread_id_from(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("roder: thread "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no thread id in stderr:\n{stderr}"))
        .to_string()
}

/// Removes every container labelled with this run's label when dropped.
struct Containers {
    docker: Docker,
    label: String,
}

impl Containers {
    /// This run's containers (any state): id → labels.
    async fn list(&self) -> HashMap<String, HashMap<String, String>> {
        list_labelled(&self.docker, &self.label).await
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

/// A home whose model is the fake server and whose runner `box` is a kept
/// docker container labelled for this run.
fn home_with_docker_runner(server: &FakeModelServer, label: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/test-model\"\n\n\
             [providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n\n\
             [runners.box]\nprovider = \"docker\"\n\
             config = {{ image = \"{IMAGE}\", cleanup = \"keep\", labels = {{ \"{TEST_LABEL}\" = \"{label}\" }} }}\n",
            server.openai_base_url()
        ),
    )
    .unwrap();
    home
}

/// Runs one docker-bound turn in `home` (a command in the container) and
/// returns the new thread's id.
async fn docker_thread(server: &FakeModelServer, home: &Path, workspace: &Path) -> String {
    server.push(ChatStream::tool_calls_reply(&[(
        "call-exec",
        "exec_command",
        r#"{"cmd":"echo in-the-box > made.txt && cat made.txt"}"#,
    )]));
    server.push(ChatStream::text_reply("Made it."));
    let run = roder(home, workspace, &["exec", "--runner", "box", "make a file"]).await;
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    assert_eq!(run.stdout, "Made it.\n");
    thread_id_from(&run.stderr)
}

fn home_id(home: &Path) -> String {
    std::fs::read_to_string(home.join("home-id"))
        .unwrap()
        .trim()
        .to_string()
}

/// The stdout line gc printed about `container`.
fn line_about<'a>(stdout: &'a str, container: &str) -> &'a str {
    stdout
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(container))
        .unwrap_or_else(|| panic!("gc said nothing about {container}:\n{stdout}"))
}

#[tokio::test]
async fn gc_of_one_home_never_touches_another_homes_sandbox() {
    if !roder_ext_runner_docker::daemon_socket_present() {
        eprintln!(
            "\n!!! SKIPPING gc_of_one_home_never_touches_another_homes_sandbox: no Docker daemon socket at {} and DOCKER_HOST is unset !!!\n",
            roder_ext_runner_docker::DEFAULT_SOCKET
        );
        return;
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
    let containers = Containers {
        docker,
        label: format!("gc-e2e-{}-{}", std::process::id(), unique_suffix()),
    };
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    let workspace = tempfile::tempdir().unwrap();
    let home_a = home_with_docker_runner(&server, &containers.label);
    let home_b = home_with_docker_runner(&server, &containers.label);

    let thread_a = docker_thread(&server, home_a.path(), workspace.path()).await;
    let thread_b = docker_thread(&server, home_b.path(), workspace.path()).await;
    let (id_of_a, id_of_b) = (home_id(home_a.path()), home_id(home_b.path()));
    assert_ne!(id_of_a, id_of_b, "each home has its own id");

    let made = containers.list().await;
    assert_eq!(made.len(), 2, "one kept container per thread: {made:#?}");
    let container_of = |thread: &str, home: &str| -> String {
        made.iter()
            .find(|(_, labels_of)| {
                labels_of.get(labels::THREAD).map(String::as_str) == Some(thread)
            })
            .map(|(id, labels_of)| {
                assert_eq!(
                    labels_of.get(labels::HOME).map(String::as_str),
                    Some(home),
                    "the container carries its home's id"
                );
                id.clone()
            })
            .unwrap_or_else(|| panic!("no container for thread {thread}: {made:#?}"))
    };
    let box_a = container_of(&thread_a, &id_of_a);
    let box_b = container_of(&thread_b, &id_of_b);

    // A's thread goes away; its container stays until A collects it.
    let deleted = roder(
        home_a.path(),
        workspace.path(),
        &["threads", "delete", &thread_a],
    )
    .await;
    assert_eq!(deleted.code, Some(0), "{}", deleted.stderr);

    let from_b = roder(home_b.path(), workspace.path(), &["runners", "gc"]).await;
    assert_eq!(from_b.code, Some(0), "{}", from_b.stderr);
    let about_a = line_about(&from_b.stdout, &box_a);
    assert!(about_a.starts_with("kept "), "{about_a}");
    assert!(
        about_a.contains(&format!("home={id_of_a}")) && about_a.contains("another Roder home"),
        "{about_a}"
    );
    let about_b = line_about(&from_b.stdout, &box_b);
    assert!(
        about_b.starts_with("kept ") && about_b.contains("its thread exists"),
        "{about_b}"
    );
    let after_b: Vec<String> = containers.list().await.into_keys().collect();
    assert!(
        after_b.contains(&box_a) && after_b.contains(&box_b),
        "B's gc kept both: {after_b:?}"
    );

    let from_a = roder(home_a.path(), workspace.path(), &["runners", "gc"]).await;
    assert_eq!(from_a.code, Some(0), "{}", from_a.stderr);
    let about_a = line_about(&from_a.stdout, &box_a);
    assert!(
        about_a.starts_with("removed ") && about_a.contains("no longer exists"),
        "{about_a}"
    );
    let about_b = line_about(&from_a.stdout, &box_b);
    assert!(
        about_b.starts_with("kept ") && about_b.contains(&format!("home={id_of_b}")),
        "{about_b}"
    );
    let after_a: Vec<String> = containers.list().await.into_keys().collect();
    assert_eq!(after_a, vec![box_b.clone()], "only A's orphan was removed");
    assert!(
        from_a.stderr.contains("removed 1 container(s)"),
        "{}",
        from_a.stderr
    );
}

/// A suffix that keeps two runs' labels apart.
fn unique_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_nanos())
        .unwrap_or_default()
}
