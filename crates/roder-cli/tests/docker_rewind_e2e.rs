//! Fork and rollback of a docker thread through the real `roder` binary,
//! on a runner whose destination says `checkpoints = "per_turn"`: `roder
//! threads fork ID --turn 1` prints the fork's id, and the fork's first
//! command runs in a new container holding turn 1's files; `roder threads
//! rollback ID --turn 1` puts back the edited and the deleted file and
//! removes the created one in the thread's own (idle-paused) container,
//! and the next request leaves turn 2 out. The containers and checkpoint
//! images are removed at the end.
//!
//! Needs the Docker daemon and `roder-sandbox:latest`
//! (`scripts/build-sandbox-image.sh`); skips loudly without a daemon socket.

mod docker_support;
mod support;

use std::collections::HashMap;

use docker_support::{docker_or_skip, home_with_docker_runner};
use roder_ext_runner_docker::DockerRunnerProvider;
use roder_ext_runner_docker::bollard::query_parameters::{
    ListImagesOptionsBuilder, RemoveImageOptionsBuilder,
};
use roder_ext_runner_docker::labels;
use roder_testkit::fake_models::{ChatStream, FakeModelServer, FakeStream};
use support::{roder, thread_id_from};

fn write(path: &str, content: &str) -> FakeStream {
    let arguments = serde_json::json!({ "path": path, "content": content }).to_string();
    ChatStream::tool_calls_reply(&[("call-write", "write_file", &arguments)])
}

fn shell(cmd: &str) -> FakeStream {
    let arguments = serde_json::json!({ "cmd": cmd }).to_string();
    ChatStream::tool_calls_reply(&[("call-exec", "exec_command", &arguments)])
}

/// Removes the snapshots (checkpoint images) of `containers` when dropped;
/// declared before the containers' guard, so it runs after their removal.
struct Snapshots {
    containers: std::sync::Mutex<Vec<String>>,
}

impl Drop for Snapshots {
    fn drop(&mut self) {
        let containers = std::mem::take(&mut *self.containers.lock().unwrap());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let docker = DockerRunnerProvider::connect()
                    .unwrap()
                    .docker()
                    .await
                    .unwrap();
                for container in containers {
                    let filters = HashMap::from([(
                        "label",
                        vec![format!("{}={container}", labels::SNAPSHOT_OF)],
                    )]);
                    let options = ListImagesOptionsBuilder::default()
                        .filters(&filters)
                        .build();
                    for image in docker.list_images(Some(options)).await.unwrap_or_default() {
                        let options = RemoveImageOptionsBuilder::default().force(true).build();
                        if let Err(error) =
                            docker.remove_image(&image.id, Some(options), None).await
                        {
                            eprintln!("could not remove checkpoint image {}: {error}", image.id);
                        }
                    }
                }
            });
        })
        .join();
    }
}

#[tokio::test]
async fn a_docker_thread_forks_and_rolls_back_through_the_binary() {
    let snapshots = Snapshots {
        containers: Default::default(),
    };
    let Some(containers) =
        docker_or_skip("a_docker_thread_forks_and_rolls_back_through_the_binary").await
    else {
        return;
    };
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    let workspace = tempfile::tempdir().unwrap();
    let home = home_with_docker_runner(
        &server.openai_base_url(),
        &containers,
        r#"checkpoints = "per_turn""#,
    );

    server.push(write("keep.txt", "turn one\n"));
    server.push(write("doomed.txt", "doomed\n"));
    server.push(ChatStream::text_reply("one done"));
    let first = roder(
        home.path(),
        workspace.path(),
        &["exec", "--runner", "box", "first turn"],
    )
    .await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let thread_id = thread_id_from(&first.stderr);
    let made = containers.list().await;
    assert_eq!(made.len(), 1, "{made:#?}");
    let source_container = made.keys().next().unwrap().clone();
    snapshots
        .containers
        .lock()
        .unwrap()
        .push(source_container.clone());

    server.push(write("keep.txt", "turn two\n"));
    server.push(shell("rm doomed.txt && echo made > created.txt"));
    server.push(ChatStream::text_reply("two done"));
    let second = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "second turn"],
    )
    .await;
    assert_eq!(second.code, Some(0), "{}", second.stderr);

    let shown = roder(
        home.path(),
        workspace.path(),
        &["threads", "show", &thread_id],
    )
    .await;
    assert!(
        shown.stdout.contains("turn 1  checkpoint"),
        "{}",
        shown.stdout
    );

    let forked = roder(
        home.path(),
        workspace.path(),
        &["threads", "fork", &thread_id, "--turn", "1"],
    )
    .await;
    assert_eq!(forked.code, Some(0), "{}", forked.stderr);
    let fork_id = forked.stdout.trim().to_string();
    assert_eq!(
        forked.stdout,
        format!("{fork_id}\n"),
        "only the id on stdout"
    );
    assert_ne!(fork_id, thread_id);

    server.push(shell(
        "cat keep.txt doomed.txt; ls -A; echo fork > fork-only.txt",
    ));
    server.push(ChatStream::text_reply("fork done"));
    let in_fork = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &fork_id, "in the fork"],
    )
    .await;
    assert_eq!(in_fork.code, Some(0), "{}", in_fork.stderr);
    let seen = server.model_requests().last().unwrap().body.to_string();
    assert!(
        seen.contains(r"turn one\ndoomed\n") && !seen.contains("created.txt"),
        "the fork has turn 1's files: {seen}"
    );
    assert!(!seen.contains("second turn"), "{seen}");
    let now = containers.list().await;
    assert_eq!(
        now.len(),
        2,
        "the fork has a container of its own: {now:#?}"
    );
    for id in now.keys() {
        snapshots.containers.lock().unwrap().push(id.clone());
    }

    let rolled_back = roder(
        home.path(),
        workspace.path(),
        &["threads", "rollback", &thread_id, "--turn", "1"],
    )
    .await;
    assert_eq!(rolled_back.code, Some(0), "{}", rolled_back.stderr);
    assert!(
        containers.is_paused(&source_container).await,
        "the idle container stays paused"
    );

    server.push(shell("cat keep.txt doomed.txt; ls -A"));
    server.push(ChatStream::text_reply("three done"));
    let third = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "third turn"],
    )
    .await;
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    let last = server.model_requests().last().unwrap().body.to_string();
    assert!(
        last.contains(r"turn one\ndoomed\n"),
        "edited and deleted files back: {last}"
    );
    assert!(
        !last.contains("created.txt") && !last.contains("fork-only.txt"),
        "the created file is gone and the fork's never came: {last}"
    );
    assert!(
        last.contains("first turn") && !last.contains("second turn"),
        "turn 2 is left out: {last}"
    );
    assert_eq!(
        containers.list().await.len(),
        2,
        "the rollback kept the thread's container"
    );
}
