//! Checkpoints, rollback and fork through the runtime, with real git
//! repositories and worktrees, real tool processes and a scripted model:
//! a rollback restores files (a created file gone, an edited file back, a
//! deleted file back) and the next request leaves the undone turns out; a
//! rollback of a running thread is refused as busy; best-of-3 forks of one
//! turn differ from each other, keep that turn's files and leave the source
//! alone; a workspace without checkpoints says rollback is not supported.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::transcript::TranscriptItem;
use roder_api::workdir::{WorkdirMaterializer, WorkdirRequest};
use roder_core::{
    CreateThreadRequest, Runtime, RuntimeConfig, RuntimeError, StartTurnRequest, WorkdirSelection,
};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_ext_runner_git_worktree::{
    GitCheckpointer, GitWorktreeMaterializer, GitWorktreeRunnerProvider,
};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=Roder Test",
            "-c",
            "user.email=test@roder.local",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

struct World {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    root: PathBuf,
    store: PathBuf,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("source");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        std::fs::write(repo.join("README.md"), "hello\n").unwrap();
        std::fs::write(repo.join("doomed.txt"), "keep me\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
        Self {
            root: dir.path().join("worktrees"),
            store: dir.path().join("store"),
            repo,
            _dir: dir,
        }
    }

    fn runtime(&self, engine: Arc<ScriptedEngine>, checkpoints: bool) -> Arc<Runtime> {
        self.runtime_with(engine, checkpoints, |_| {})
    }

    fn runtime_with(
        &self,
        engine: Arc<ScriptedEngine>,
        checkpoints: bool,
        adjust: impl FnOnce(&mut RuntimeConfig),
    ) -> Arc<Runtime> {
        let mut builder = ExtensionRegistryBuilder::new();
        builder.inference_engine(engine);
        builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
            base_path: self.store.clone(),
        }));
        builder.workdir_materializer(Arc::new(GitWorktreeMaterializer::new(self.root.clone())));
        builder.remote_runner_provider(Arc::new(GitWorktreeRunnerProvider::new(self.root.clone())));
        if checkpoints {
            builder.workspace_checkpointer(Arc::new(GitCheckpointer::new(self.root.clone())));
        }
        builder.tool_contributor(
            roder_tools::builtin_coding_tools_contributor(self.repo.clone()).unwrap(),
        );
        let mut config = RuntimeConfig {
            workspace: Some(self.repo.display().to_string()),
            ..RuntimeConfig::default()
        };
        adjust(&mut config);
        Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap())
    }

    async fn worktree_thread(&self, runtime: &Runtime) -> (String, PathBuf) {
        let thread = runtime
            .create_thread_in_workdir(
                CreateThreadRequest::in_workspace(self.repo.display().to_string()),
                WorkdirSelection::Materialize(WorkdirRequest {
                    repository: self.repo.clone(),
                    selector: None,
                    id: None,
                }),
            )
            .await
            .unwrap();
        let workspace = thread.runner_binding.as_ref().unwrap().workspace.clone();
        (thread.thread_id, workspace)
    }
}

async fn run_turn(runtime: &Arc<Runtime>, thread_id: &str, message: &str) -> Vec<EventEnvelope> {
    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(thread_id, message))
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let envelope = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .unwrap()
            .unwrap();
        if envelope.thread_id != thread_id {
            continue;
        }
        let done = envelope.event.is_terminal();
        match &envelope.event {
            RoderEvent::TurnFailed(failed) => panic!("turn failed: {}", failed.error),
            RoderEvent::ToolCallCompleted(call) if call.is_error => {
                panic!("tool call failed: {:?}", call.output)
            }
            _ => {}
        }
        seen.push(envelope);
        if done {
            return seen;
        }
    }
}

fn write(id: &str, path: &str, content: &str) -> (String, String, String) {
    let arguments = serde_json::json!({ "path": path, "content": content }).to_string();
    (id.to_string(), "write_file".to_string(), arguments)
}

fn round(calls: &[(String, String, String)]) -> ScriptedRound {
    let borrowed: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, name, arguments)| (id.as_str(), name.as_str(), arguments.as_str()))
        .collect();
    tool_round(&borrowed)
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

#[tokio::test]
async fn a_rollback_restores_files_and_the_next_request_leaves_the_undone_turns_out() {
    let world = World::new();
    let engine = ScriptedEngine::new(vec![
        round(&[write("w1", "kept.txt", "turn one\n")]),
        final_round("turn one done"),
        round(&[
            write("w2", "created.txt", "turn two\n"),
            write("w3", "README.md", "edited by turn two\n"),
        ]),
        tool_round(&[("rm", "exec_command", r#"{"cmd":"rm doomed.txt"}"#)]),
        final_round("turn two done"),
        final_round("turn three done"),
    ]);
    let runtime = world.runtime(engine.clone(), true);
    let (thread_id, checkout) = world.worktree_thread(&runtime).await;

    let first = run_turn(&runtime, &thread_id, "first: write kept.txt").await;
    assert!(
        first
            .iter()
            .any(|e| matches!(&e.event, RoderEvent::WorkspaceCheckpointed(_))),
        "each turn records a checkpoint event"
    );
    run_turn(&runtime, &thread_id, "second: create, edit, delete").await;
    assert!(checkout.join("created.txt").exists());
    assert!(!checkout.join("doomed.txt").exists());

    let targets = runtime.rewind_targets(&thread_id).await.unwrap();
    let turns: Vec<u32> = targets.iter().map(|target| target.turn).collect();
    assert_eq!(turns, vec![0, 1]);
    assert_eq!(targets[1].message.as_deref(), Some("first: write kept.txt"));

    let rolled_back = runtime.rollback_thread(&thread_id, 1).await.unwrap();
    assert_eq!(rolled_back.to_turn, 1);
    assert_eq!(rolled_back.rolled_back_turns.len(), 1);
    assert!(!checkout.join("created.txt").exists(), "created file gone");
    assert_eq!(
        std::fs::read_to_string(checkout.join("README.md")).unwrap(),
        "hello\n",
        "edited file back"
    );
    assert_eq!(
        std::fs::read_to_string(checkout.join("doomed.txt")).unwrap(),
        "keep me\n",
        "deleted file back"
    );
    assert_eq!(
        std::fs::read_to_string(checkout.join("kept.txt")).unwrap(),
        "turn one\n",
        "turn one's work stays"
    );

    run_turn(&runtime, &thread_id, "third: after the rollback").await;
    let last = engine.requests().last().cloned().unwrap();
    assert_eq!(
        user_messages(&last.transcript),
        vec!["first: write kept.txt", "third: after the rollback"],
        "the rolled-back turn is out of the request"
    );
    let serialized = serde_json::to_string(&last.transcript).unwrap();
    assert!(!serialized.contains("turn two"), "{serialized}");

    // The log keeps everything, the rollback included; turn 3 is now turn 2.
    let snapshot = runtime.load_thread(&thread_id).await.unwrap().unwrap();
    let text = serde_json::to_string(&snapshot.events).unwrap();
    assert!(text.contains("second: create, edit, delete"));
    assert!(text.contains("thread_rolled_back"));
    let targets = runtime.rewind_targets(&thread_id).await.unwrap();
    assert_eq!(
        targets.iter().map(|target| target.turn).collect::<Vec<_>>(),
        vec![0, 1]
    );
    let error = runtime
        .rollback_thread(&thread_id, 2)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("is at turn 2"), "{error}");
}

#[tokio::test]
async fn a_rollback_of_a_thread_whose_turn_runs_is_refused_as_busy() {
    let world = World::new();
    let engine = ScriptedEngine::new(vec![final_round("one"), ScriptedRound::Hang]);
    let runtime = world.runtime(engine.clone(), true);
    let (thread_id, _checkout) = world.worktree_thread(&runtime).await;
    run_turn(&runtime, &thread_id, "one").await;
    let turn_id = runtime
        .start_turn(StartTurnRequest::new(&thread_id, "hangs"))
        .await
        .unwrap();
    engine.wait_for_requests(2).await;
    let before = runtime.last_seq(&thread_id).await.unwrap();
    let error = runtime.rollback_thread(&thread_id, 0).await.unwrap_err();
    assert!(
        matches!(
            error.downcast_ref::<RuntimeError>(),
            Some(RuntimeError::ThreadBusy { turn_id: running, .. }) if *running == turn_id
        ),
        "{error:#}"
    );
    assert_eq!(
        runtime.last_seq(&thread_id).await.unwrap(),
        before,
        "nothing written"
    );
    runtime.interrupt_turn(&thread_id, &turn_id).await.unwrap();
    runtime.rollback_thread(&thread_id, 0).await.unwrap();
}

#[tokio::test]
async fn best_of_three_forks_of_one_turn_differ_keep_its_files_and_leave_the_source_alone() {
    let world = World::new();
    let engine = ScriptedEngine::new(vec![
        round(&[write("base", "base.txt", "from turn one\n")]),
        final_round("base written"),
        round(&[write("later", "source-only.txt", "turn two\n")]),
        final_round("source went on"),
    ]);
    let runtime = world.runtime(engine.clone(), true);
    let (source_id, source_dir) = world.worktree_thread(&runtime).await;
    run_turn(&runtime, &source_id, "turn one").await;
    run_turn(&runtime, &source_id, "turn two").await;
    let source_log_before = runtime.last_seq(&source_id).await.unwrap();
    let source_status_before = git(&source_dir, &["status", "--porcelain"]);

    let mut forks = Vec::new();
    for attempt in ["alpha", "beta", "gamma"] {
        let fork = runtime.fork_thread(&source_id, Some(1)).await.unwrap();
        engine.push_round(round(&[write(attempt, "answer.txt", attempt)]));
        engine.push_round(final_round(attempt));
        run_turn(&runtime, &fork.thread_id, &format!("try {attempt}")).await;
        let request = engine.requests().last().cloned().unwrap();
        assert_eq!(
            user_messages(&request.transcript),
            vec!["turn one".to_string(), format!("try {attempt}")],
            "a fork's model sees the source's turns up to the fork, then its own"
        );
        let dir = fork.runner_binding.as_ref().unwrap().workspace.clone();
        forks.push((fork.thread_id, dir, attempt));
    }

    let mut answers = std::collections::BTreeSet::new();
    for (_, dir, attempt) in &forks {
        assert_ne!(dir, &source_dir);
        assert_eq!(
            std::fs::read_to_string(dir.join("answer.txt")).unwrap(),
            *attempt
        );
        answers.insert(std::fs::read_to_string(dir.join("answer.txt")).unwrap());
        assert_eq!(
            std::fs::read_to_string(dir.join("base.txt")).unwrap(),
            "from turn one\n",
            "each fork keeps turn one's files"
        );
        assert!(
            !dir.join("source-only.txt").exists(),
            "forked before turn two"
        );
    }
    assert_eq!(answers.len(), 3, "the three workspaces differ");
    assert!(!source_dir.join("answer.txt").exists());
    assert!(source_dir.join("source-only.txt").exists());
    assert_eq!(
        git(&source_dir, &["status", "--porcelain"]),
        source_status_before
    );
    assert_eq!(
        runtime.last_seq(&source_id).await.unwrap(),
        source_log_before
    );

    // A fork's turns continue its source's numbering; it can go back to the
    // fork point, not before it.
    let (fork_id, fork_dir, _) = &forks[0];
    let targets = runtime.rewind_targets(fork_id).await.unwrap();
    assert_eq!(targets.iter().map(|t| t.turn).collect::<Vec<_>>(), vec![1]);
    runtime.rollback_thread(fork_id, 1).await.unwrap();
    assert!(!fork_dir.join("answer.txt").exists());
    assert!(fork_dir.join("base.txt").exists());
    let error = runtime
        .rollback_thread(fork_id, 0)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("fork made at turn 1"), "{error}");

    // Forking at the current turn copies the workspace as it is now.
    let now = runtime.fork_thread(&source_id, None).await.unwrap();
    let now_dir = now.runner_binding.as_ref().unwrap().workspace.clone();
    assert!(now_dir.join("source-only.txt").exists());
    let materializer = GitWorktreeMaterializer::new(world.root.clone());
    assert_eq!(materializer.list().await.unwrap().len(), 5);
}

#[tokio::test]
async fn a_local_workspace_in_a_git_repository_rolls_back_and_one_outside_says_not_supported() {
    let world = World::new();
    let engine = ScriptedEngine::new(vec![
        round(&[write("a", "made-locally.txt", "x\n")]),
        final_round("made"),
    ]);
    let runtime = world.runtime(engine, true);
    let thread = runtime
        .create_thread(Some(world.repo.display().to_string()))
        .await
        .unwrap();
    run_turn(&runtime, &thread.thread_id, "make a file").await;
    assert!(world.repo.join("made-locally.txt").exists());
    runtime.rollback_thread(&thread.thread_id, 0).await.unwrap();
    assert!(!world.repo.join("made-locally.txt").exists());
    assert_eq!(git(&world.repo, &["status", "--porcelain"]), "");
    // The checkpoint stays reachable outside any branch.
    let refs = git(&world.repo, &["for-each-ref", "refs/roder/checkpoints"]);
    assert!(refs.contains(&thread.thread_id), "{refs}");
    assert_eq!(git(&world.repo, &["branch", "--list"]).trim(), "* main");

    let plain = tempfile::tempdir().unwrap();
    let other = runtime
        .create_thread(Some(plain.path().display().to_string()))
        .await
        .unwrap();
    run_turn(&runtime, &other.thread_id, "nothing to save").await;
    let error = runtime
        .rollback_thread(&other.thread_id, 0)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("no checkpoint was taken"), "{error}");
}

#[tokio::test]
async fn without_a_checkpointer_rollback_and_fork_say_not_supported() {
    let world = World::new();
    let runtime = world.runtime(ScriptedEngine::new(vec![final_round("hi")]), false);
    let (thread_id, _) = world.worktree_thread(&runtime).await;
    run_turn(&runtime, &thread_id, "hi").await;
    for error in [
        runtime.rollback_thread(&thread_id, 0).await.unwrap_err(),
        runtime.fork_thread(&thread_id, None).await.unwrap_err(),
    ] {
        let text = error.to_string();
        assert!(
            text.contains("not supported") && text.contains("git-worktree"),
            "{text}"
        );
    }
    assert!(runtime.rewind_targets(&thread_id).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_unix_local_thread_rolls_back_and_forks_by_directory_copy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("runner-root");
    let engine = ScriptedEngine::new(vec![
        round(&[write("a", "made.txt", "one\n")]),
        final_round("made"),
    ]);
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine);
    builder.remote_runner_provider(Arc::new(
        roder_ext_runner_unix_local::UnixLocalRunnerProvider::default(),
    ));
    builder.workspace_checkpointer(Arc::new(
        roder_ext_runner_unix_local::DirectoryCheckpointer::new(dir.path().join("copies")),
    ));
    builder.tool_contributor(
        roder_tools::builtin_coding_tools_contributor(dir.path().to_path_buf()).unwrap(),
    );
    let runtime =
        Arc::new(Runtime::new(builder.build().unwrap(), RuntimeConfig::default()).unwrap());
    let mut request = CreateThreadRequest::in_workspace(dir.path().display().to_string());
    request.runner = Some(roder_core::ThreadRunnerSelection {
        provider_id: "unix-local".into(),
        config: serde_json::json!({ "root": root }),
        workspace: root.display().to_string(),
        read_roots: vec![],
    });
    let thread = runtime.create_thread_with(request).await.unwrap();
    run_turn(&runtime, &thread.thread_id, "make").await;
    assert!(root.join("made.txt").exists());

    let fork = runtime.fork_thread(&thread.thread_id, None).await.unwrap();
    let fork_root = fork.runner_binding.as_ref().unwrap().workspace.clone();
    assert_ne!(fork_root, root);
    assert!(fork_root.join("made.txt").exists());

    runtime.rollback_thread(&thread.thread_id, 0).await.unwrap();
    assert!(!root.join("made.txt").exists());
    assert!(
        fork_root.join("made.txt").exists(),
        "the fork keeps its copy"
    );
}

#[tokio::test]
async fn a_long_lived_runtime_collects_a_threads_old_checkpoints_every_keep_turns() {
    let world = World::new();
    let engine = ScriptedEngine::new(
        (0..7)
            .map(|turn| final_round(&format!("turn {turn}")))
            .collect(),
    );
    let runtime = world.runtime_with(engine, true, |config| {
        config.checkpoint_keep_turns = Some(2);
    });
    let (thread_id, _) = world.worktree_thread(&runtime).await;
    let refs = || {
        git(
            &world.repo,
            &[
                "for-each-ref",
                "--format=%(refname)",
                &format!("refs/roder/checkpoints/{thread_id}/"),
            ],
        )
        .lines()
        .count()
    };
    let mut most = 0;
    for turn in 0..7 {
        run_turn(&runtime, &thread_id, &format!("turn {turn}")).await;
        runtime.settle_checkpoint_collections().await;
        most = most.max(refs());
    }
    assert_eq!(refs(), 2, "the last two turns' checkpoints");
    assert!(
        most <= 3,
        "never more than keep + keep - 1 between collections: {most}"
    );
}
