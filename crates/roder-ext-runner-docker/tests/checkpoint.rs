//! Rollback and fork of docker threads through the real runtime, with the
//! real daemon and `roder-sandbox:latest`: per-turn checkpoints are
//! container commits (events), a rollback brings back an edited and a
//! deleted file and removes a created one in the thread's own container,
//! and the next request leaves the undone turn out; a fork gets a new
//! container from the committed image with turn 1's files while the source
//! is untouched; a rollback while a turn runs is refused as busy. Every
//! container and checkpoint image is removed at the end.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use std::collections::HashMap;

use bollard::query_parameters::{ListImagesOptionsBuilder, RemoveImageOptionsBuilder};
use roder_api::events::RoderEvent;
use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerFileReadRequest, RunnerSessionState,
};
use roder_api::transcript::TranscriptItem;
use roder_core::{
    CreateThreadRequest, Runtime, RuntimeConfig, RuntimeError, StartTurnRequest,
    ThreadRunnerSelection,
};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_ext_runner_docker::checkpoint::CHECKPOINTER_ID;
use roder_ext_runner_docker::{DockerCheckpointer, DockerRunnerProvider, labels};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::{Value, json};
use support::*;

fn runtime(
    engine: Arc<ScriptedEngine>,
    store: &Path,
    host: &Path,
    provider: Arc<DockerRunnerProvider>,
) -> Arc<Runtime> {
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine);
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.to_path_buf(),
    }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(host).unwrap());
    builder.remote_runner_provider(provider.clone());
    builder.workspace_checkpointer(Arc::new(DockerCheckpointer::new(provider)));
    let config = RuntimeConfig {
        workspace: Some(host.display().to_string()),
        ..RuntimeConfig::default()
    };
    Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap())
}

/// Removes, when dropped, the checkpoint images it was told of and every
/// snapshot of the containers it was told of (after the containers made
/// from them: declare it before the [`TestLabel`]).
struct Images {
    docker: bollard::Docker,
    refs: std::sync::Mutex<BTreeSet<String>>,
}

impl Images {
    fn note(&self, image: String) {
        self.refs.lock().unwrap().insert(image);
    }

    fn note_container(&self, container: &str) {
        self.note(format!("{}={container}", labels::SNAPSHOT_OF));
    }
}

impl Drop for Images {
    fn drop(&mut self) {
        let docker = self.docker.clone();
        let refs = std::mem::take(&mut *self.refs.lock().unwrap());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let mut all = Vec::new();
                for image in refs {
                    if !image.starts_with(labels::SNAPSHOT_OF) {
                        all.push(image);
                        continue;
                    }
                    let filters = HashMap::from([("label", vec![image])]);
                    let options = ListImagesOptionsBuilder::default()
                        .filters(&filters)
                        .build();
                    for summary in docker.list_images(Some(options)).await.unwrap_or_default() {
                        all.push(summary.id);
                    }
                }
                for image in all {
                    let options = RemoveImageOptionsBuilder::default().force(true).build();
                    if let Err(error) = docker.remove_image(&image, Some(options), None).await {
                        eprintln!("could not remove checkpoint image {image}: {error}");
                    }
                }
            });
        })
        .join();
    }
}

async fn run_turn(runtime: &Arc<Runtime>, thread_id: &str, message: &str) {
    let mut events = runtime.subscribe_events();
    let turn_id = runtime
        .start_turn(StartTurnRequest::new(thread_id, message))
        .await
        .unwrap();
    loop {
        let envelope = tokio::time::timeout(std::time::Duration::from_secs(120), events.recv())
            .await
            .expect("the turn should end within 120 s")
            .unwrap();
        if envelope.thread_id == thread_id && envelope.event.is_terminal() {
            assert!(
                matches!(envelope.event, RoderEvent::TurnCompleted(_)),
                "turn {turn_id}: {:?}",
                envelope.event
            );
            return;
        }
    }
}

/// The checkpoints of `thread_id`'s log (turn id, image, kind), noting
/// each committed image for removal.
async fn checkpoints(
    runtime: &Runtime,
    thread_id: &str,
    images: &Images,
) -> Vec<(String, String, String)> {
    let events = runtime
        .read_thread_events(thread_id, 0)
        .await
        .unwrap()
        .events;
    let mut found = Vec::new();
    for envelope in events {
        match envelope.event {
            RoderEvent::WorkspaceCheckpointed(taken) => {
                assert_eq!(taken.checkpoint.checkpointer, CHECKPOINTER_ID);
                let kind = taken.checkpoint.metadata["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if kind == "commit" {
                    images.note(taken.checkpoint.id.clone());
                }
                found.push((taken.turn_id, taken.checkpoint.id, kind));
            }
            RoderEvent::WorkspaceCheckpointFailed(failed) => {
                panic!("a checkpoint failed: {}", failed.error)
            }
            _ => {}
        }
    }
    found
}

/// The thread's persisted session state; its container's snapshots are
/// removed at the end.
async fn runner_state(runtime: &Runtime, thread_id: &str, images: &Images) -> RunnerSessionState {
    let state = runtime
        .thread_metadata(thread_id)
        .await
        .unwrap()
        .runner_state
        .expect("the thread has a container");
    images.note_container(&state.session_id);
    state
}

/// A handle on a thread's container from outside the runtime, never
/// closed (closing would remove the container).
async fn view(state: &RunnerSessionState) -> Arc<dyn RemoteRunnerSession> {
    DockerRunnerProvider::connect()
        .unwrap()
        .rejoin_session(state.clone())
        .await
        .unwrap()
}

async fn read(session: &dyn RemoteRunnerSession, path: &str) -> Option<String> {
    session
        .read_file(RunnerFileReadRequest { path: path.into() })
        .await
        .ok()
        .map(|read| String::from_utf8(read.contents).unwrap())
}

fn write(id: &str, path: &str, content: &str) -> (String, String, String) {
    (
        id.to_string(),
        "write_file".to_string(),
        json!({"path": path, "content": content}).to_string(),
    )
}

fn shell(id: &str, cmd: &str) -> (String, String, String) {
    (
        id.to_string(),
        "exec_command".to_string(),
        json!({ "cmd": cmd }).to_string(),
    )
}

fn round(calls: &[(String, String, String)]) -> ScriptedRound {
    let calls: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, name, arguments)| (id.as_str(), name.as_str(), arguments.as_str()))
        .collect();
    tool_round(&calls)
}

fn user_messages(transcript: &[TranscriptItem]) -> Vec<String> {
    transcript
        .iter()
        .filter_map(|item| match item {
            TranscriptItem::UserMessage { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// The whole story on a destination with `extra` config (the sandbox
/// policy decides whether the workspace is a volume or the container's own
/// filesystem).
async fn rollback_and_fork(test: &str, extra: Value) {
    let Some(provider) = provider(test).await else {
        return;
    };
    let images = Images {
        docker: provider.docker().await.unwrap(),
        refs: Default::default(),
    };
    let label = TestLabel::new(&provider).await;
    let provider = Arc::new(provider);
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let engine = ScriptedEngine::new(vec![
        round(&[
            write("k1", "keep.txt", "turn one\n"),
            write("d1", "doomed.txt", "doomed\n"),
            shell(
                "s1",
                "mkdir -p sub && echo nested > sub/n.txt && echo hidden > .dot",
            ),
        ]),
        final_round("one done"),
        round(&[
            write("k2", "keep.txt", "turn two\n"),
            shell("r2", "rm doomed.txt .dot"),
            write("c2", "created.txt", "made in turn two\n"),
        ]),
        final_round("two done"),
    ]);
    let runtime = runtime(engine.clone(), store.path(), host.path(), provider.clone());
    let mut config = label.config(json!({"checkpoints": "per_turn"}));
    if let (Some(config), Value::Object(extra)) = (config.as_object_mut(), extra) {
        config.extend(extra);
    }
    let mut request = CreateThreadRequest::in_workspace(host.path().display().to_string());
    request.runner = Some(ThreadRunnerSelection {
        provider_id: "docker".into(),
        config,
        workspace: "/workspace".into(),
        read_roots: Vec::new(),
    });
    let source = runtime.create_thread_with(request).await.unwrap().thread_id;
    run_turn(&runtime, &source, "turn one").await;
    run_turn(&runtime, &source, "turn two").await;

    let taken = checkpoints(&runtime, &source, &images).await;
    assert_eq!(taken.len(), 2, "{taken:?}");
    assert_eq!(
        (taken[0].1.as_str(), taken[0].2.as_str()),
        (IMAGE, "image"),
        "before the first container the checkpoint is the image"
    );
    assert_eq!(taken[1].2, "commit");
    assert!(taken[1].1.starts_with("roder-snapshot:"), "{taken:?}");
    let targets = runtime.rewind_targets(&source).await.unwrap();
    assert_eq!(
        targets.iter().map(|target| target.turn).collect::<Vec<_>>(),
        vec![0, 1]
    );
    let source_state = runner_state(&runtime, &source, &images).await;
    let source_view = view(&source_state).await;
    assert_eq!(
        read(source_view.as_ref(), "keep.txt").await.as_deref(),
        Some("turn two\n")
    );

    // Fork at turn 1: a new container from the committed image.
    let fork = runtime.fork_thread(&source, Some(1)).await.unwrap();
    let fork_config = &fork.runner_binding.as_ref().unwrap().destination.config;
    assert_eq!(fork_config["image"], json!(taken[1].1));
    engine.push_round(round(&[shell(
        "f1",
        "cat keep.txt sub/n.txt .dot; ls -A; echo fork > fork-only.txt; rm doomed.txt",
    )]));
    engine.push_round(final_round("fork done"));
    run_turn(&runtime, &fork.thread_id, "in the fork").await;
    let seen = engine.requests().last().cloned().unwrap();
    let output = format!("{:?}", seen.transcript.last());
    for expected in ["turn one", "nested", "hidden", "doomed.txt"] {
        assert!(output.contains(expected), "{expected} in {output}");
    }
    assert!(!output.contains("created.txt"), "{output}");
    assert_eq!(
        user_messages(&seen.transcript),
        vec!["turn one", "in the fork"],
        "the fork's model sees turn one, then its own"
    );
    let fork_state = runner_state(&runtime, &fork.thread_id, &images).await;
    assert_ne!(fork_state.session_id, source_state.session_id);
    assert_eq!(
        read(source_view.as_ref(), "keep.txt").await.as_deref(),
        Some("turn two\n"),
        "the source is untouched"
    );
    assert_eq!(read(source_view.as_ref(), "fork-only.txt").await, None);

    // Roll the source back to turn 1, in its own container.
    let rolled_back = runtime.rollback_thread(&source, 1).await.unwrap();
    assert_eq!(rolled_back.rolled_back_turns.len(), 1);
    assert_eq!(
        runner_state(&runtime, &source, &images).await.session_id,
        source_state.session_id,
        "same container"
    );
    assert_eq!(
        read(source_view.as_ref(), "keep.txt").await.as_deref(),
        Some("turn one\n"),
        "edited file back"
    );
    assert_eq!(
        read(source_view.as_ref(), "doomed.txt").await.as_deref(),
        Some("doomed\n"),
        "deleted file back"
    );
    assert_eq!(
        read(source_view.as_ref(), ".dot").await.as_deref(),
        Some("hidden\n")
    );
    assert_eq!(
        read(source_view.as_ref(), "sub/n.txt").await.as_deref(),
        Some("nested\n")
    );
    assert_eq!(
        read(source_view.as_ref(), "created.txt").await,
        None,
        "created file gone"
    );

    // The next request leaves turn two out; a turn that runs is busy.
    engine.push_round(round(&[shell("l3", "ls -A")]));
    engine.push_round(ScriptedRound::Hang);
    let turn_id = runtime
        .start_turn(StartTurnRequest::new(&source, "turn three"))
        .await
        .unwrap();
    engine.wait_for_requests(8).await;
    let third = engine.requests().last().cloned().unwrap();
    assert_eq!(
        user_messages(&third.transcript),
        vec!["turn one", "turn three"]
    );
    let listing = format!("{:?}", third.transcript.last());
    assert!(
        listing.contains("doomed.txt") && !listing.contains("created.txt"),
        "{listing}"
    );
    let busy = runtime.rollback_thread(&source, 1).await.unwrap_err();
    assert!(
        matches!(
            busy.downcast_ref::<RuntimeError>(),
            Some(RuntimeError::ThreadBusy { .. })
        ),
        "{busy:#}"
    );
    runtime.interrupt_turn(&source, &turn_id).await.unwrap();

    // The fork's own checkpoint (a commit of a container made from a
    // checkpoint) keeps the fork's deletion when rolled back to.
    engine.push_round(round(&[write("f2", "fork-only.txt", "changed\n")]));
    engine.push_round(final_round("fork again"));
    run_turn(&runtime, &fork.thread_id, "fork again").await;
    let fork_taken = checkpoints(&runtime, &fork.thread_id, &images).await;
    assert_eq!(fork_taken.len(), 2, "{fork_taken:?}");
    runtime.rollback_thread(&fork.thread_id, 2).await.unwrap();
    let fork_view = view(&fork_state).await;
    assert_eq!(
        read(fork_view.as_ref(), "fork-only.txt").await.as_deref(),
        Some("fork\n")
    );
    assert_eq!(read(fork_view.as_ref(), "doomed.txt").await, None);
    assert_eq!(
        read(fork_view.as_ref(), "keep.txt").await.as_deref(),
        Some("turn one\n")
    );

    // A fork at the current turn commits the container now.
    let now = runtime.fork_thread(&source, None).await.unwrap();
    let now_image = now.runner_binding.as_ref().unwrap().destination.config["image"]
        .as_str()
        .unwrap()
        .to_string();
    images.note(now_image.clone());
    assert!(
        now_image.starts_with("roder-snapshot:") && now_image != taken[1].1,
        "{now_image}"
    );
    runtime.delete_thread(&now.thread_id).await.unwrap();

    // Back to turn 0: the checkpoint is the image, restored into the
    // thread's container (nothing the turns wrote is left).
    runtime.rollback_thread(&source, 0).await.unwrap();
    let listing = run(source_view.as_ref(), "ls -A").await;
    assert_eq!(listing.exit_code, Some(0), "{listing:?}");
    assert_eq!(listing.stdout, "", "an empty workspace again");

    // Deleting the threads removes their containers.
    runtime.delete_thread(&fork.thread_id).await.unwrap();
    runtime.delete_thread(&source).await.unwrap();
    checkpoints_cleanup_check(&label).await;
}

async fn checkpoints_cleanup_check(label: &TestLabel) {
    let left = label.containers().await;
    assert!(left.is_empty(), "containers left: {left:?}");
}

#[tokio::test]
async fn a_confined_docker_thread_rolls_back_and_forks_with_its_files() {
    rollback_and_fork(
        "a_confined_docker_thread_rolls_back_and_forks_with_its_files",
        json!({}),
    )
    .await;
}

#[tokio::test]
async fn an_unconfined_docker_thread_rolls_back_and_forks_with_its_files() {
    rollback_and_fork(
        "an_unconfined_docker_thread_rolls_back_and_forks_with_its_files",
        json!({"sandbox": {"mode": "none"}}),
    )
    .await;
}

#[tokio::test]
async fn without_per_turn_checkpoints_a_docker_thread_cannot_roll_back() {
    let Some(provider) =
        provider("without_per_turn_checkpoints_a_docker_thread_cannot_roll_back").await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let provider = Arc::new(provider);
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let engine = ScriptedEngine::new(vec![final_round("one"), final_round("two")]);
    let runtime = runtime(engine, store.path(), host.path(), provider);
    let mut request = CreateThreadRequest::in_workspace(host.path().display().to_string());
    request.runner = Some(ThreadRunnerSelection {
        provider_id: "docker".into(),
        config: label.config(json!({})),
        workspace: "/workspace".into(),
        read_roots: Vec::new(),
    });
    let thread = runtime.create_thread_with(request).await.unwrap().thread_id;
    run_turn(&runtime, &thread, "one").await;
    run_turn(&runtime, &thread, "two").await;
    let error = runtime.rollback_thread(&thread, 1).await.unwrap_err();
    assert!(
        format!("{error:#}").contains("no checkpoint was taken when turn 2 started"),
        "{error:#}"
    );
    let error = runtime.fork_thread(&thread, None).await.unwrap_err();
    assert!(
        format!("{error:#}").contains("has no checkpoints"),
        "{error:#}"
    );
    let refused = runtime
        .create_thread_with({
            let mut request = CreateThreadRequest::in_workspace(host.path().display().to_string());
            request.runner = Some(ThreadRunnerSelection {
                provider_id: "docker".into(),
                config: label.config(json!({"checkpoints": "always"})),
                workspace: "/workspace".into(),
                read_roots: Vec::new(),
            });
            request
        })
        .await
        .unwrap_err();
    assert!(
        format!("{refused:#}").contains("`checkpoints` must be \"per_turn\""),
        "{refused:#}"
    );
}
