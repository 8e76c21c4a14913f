//! `roder gc` on docker checkpoint images through the real binary: a
//! docker thread whose destination says `checkpoints = "per_turn"` takes a
//! commit of its container at the start of each turn after its first;
//! `gc --keep-turns 1 --dry-run` lists the older image and removes nothing,
//! `gc --keep-turns 1` removes it and keeps the last one, and deleting the
//! thread removes that too (`keep_turns` stays at its default of 10, so
//! the runtime's own collection after each turn removes nothing here). Images are counted by their
//! `dev.roder.snapshot.of` label (the thread's container).
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
use roder_testkit::fake_models::{ChatStream, FakeStream};
use support::{roder, thread_id_from};

fn shell(cmd: &str) -> FakeStream {
    let arguments = serde_json::json!({ "cmd": cmd }).to_string();
    ChatStream::tool_calls_reply(&[("call-exec", "exec_command", &arguments)])
}

/// The checkpoint images of `container`.
async fn images_of(container: &str) -> Vec<String> {
    let docker = DockerRunnerProvider::connect()
        .unwrap()
        .docker()
        .await
        .unwrap();
    let filters = HashMap::from([(
        "label",
        vec![format!("{}={container}", labels::SNAPSHOT_OF)],
    )]);
    let options = ListImagesOptionsBuilder::default()
        .filters(&filters)
        .build();
    docker
        .list_images(Some(options))
        .await
        .unwrap()
        .into_iter()
        .map(|image| image.id)
        .collect()
}

/// Removes what the test left of `container`'s images, whatever happened.
struct LeftImages(String);

impl Drop for LeftImages {
    fn drop(&mut self) {
        let container = self.0.clone();
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
                for image in images_of(&container).await {
                    let options = RemoveImageOptionsBuilder::default().force(true).build();
                    let _ = docker.remove_image(&image, Some(options), None).await;
                }
            });
        })
        .join();
    }
}

#[tokio::test]
async fn gc_removes_docker_checkpoint_images_past_the_retention() {
    let Some(containers) =
        docker_or_skip("gc_removes_docker_checkpoint_images_past_the_retention").await
    else {
        return;
    };
    let server = roder_testkit::fake_models::FakeModelServer::start()
        .await
        .unwrap();
    server.require_api_key("test-key");
    let workspace = tempfile::tempdir().unwrap();
    let home = home_with_docker_runner(
        &server.openai_base_url(),
        &containers,
        r#"checkpoints = "per_turn""#,
    );

    server.push(shell("echo one > one.txt"));
    server.push(ChatStream::text_reply("one done"));
    let first = roder(
        home.path(),
        workspace.path(),
        &["exec", "--runner", "box", "first turn"],
    )
    .await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let thread = thread_id_from(&first.stderr);
    let container = containers.list().await.keys().next().unwrap().clone();
    let _left = LeftImages(container.clone());
    for turn in ["second", "third"] {
        server.push(shell(&format!("echo {turn} > {turn}.txt")));
        server.push(ChatStream::text_reply("done"));
        let run = roder(
            home.path(),
            workspace.path(),
            &["exec", "--thread", &thread, turn],
        )
        .await;
        assert_eq!(run.code, Some(0), "{}", run.stderr);
    }
    // Turns two and three each started with a commit of the container.
    let before = images_of(&container).await;
    assert_eq!(before.len(), 2, "{before:?}");

    let dry = roder(
        home.path(),
        workspace.path(),
        &["gc", "--keep-turns", "1", "--dry-run"],
    )
    .await;
    assert_eq!(dry.code, Some(0), "{}", dry.stderr);
    assert_eq!(
        dry.stdout
            .lines()
            .filter(|line| line.starts_with("would remove checkpoint docker-commit"))
            .count(),
        1,
        "{}",
        dry.stdout
    );
    assert_eq!(
        images_of(&container).await,
        before,
        "a dry run removes nothing"
    );

    let collected = roder(home.path(), workspace.path(), &["gc", "--keep-turns", "1"]).await;
    assert_eq!(collected.code, Some(0), "{}", collected.stderr);
    let after = images_of(&container).await;
    assert_eq!(after.len(), 1, "{}", collected.stdout);

    let deleted = roder(
        home.path(),
        workspace.path(),
        &["threads", "delete", &thread],
    )
    .await;
    assert_eq!(deleted.code, Some(0), "{}", deleted.stderr);
    assert!(images_of(&container).await.is_empty());
}
