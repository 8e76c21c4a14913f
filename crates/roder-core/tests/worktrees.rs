//! Threads in git worktrees (SPEC section 6), with real git repositories:
//! the seed's three scenarios, parallel threads in parallel worktrees whose
//! exported patches apply to the source, and a follower reading a thread's
//! events by cursor across a restart.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::workdir::{
    Cleanliness, WorkdirClaim, WorkdirMaterializer, WorkdirRequest, WorkdirStatus,
};
use roder_core::{CreateThreadRequest, Runtime, RuntimeConfig, StartTurnRequest, WorkdirSelection};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_ext_runner_git_worktree::{GitWorktreeMaterializer, GitWorktreeRunnerProvider};
use roder_testkit::{ScriptedEngine, final_round, tool_round};

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

/// A source repository with one committed file.
fn source_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("source");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    repo
}

struct World {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    root: PathBuf,
    store: PathBuf,
    materializer: Arc<GitWorktreeMaterializer>,
}

impl World {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = source_repo(dir.path());
        let root = dir.path().join("worktrees");
        let store = dir.path().join("store");
        Self {
            materializer: Arc::new(GitWorktreeMaterializer::new(root.clone())),
            _dir: dir,
            repo,
            root,
            store,
        }
    }

    /// A runtime with the materializer and (unless `without_provider`) the
    /// worktree runner provider.
    fn runtime(&self, engine: Arc<ScriptedEngine>, without_provider: bool) -> Arc<Runtime> {
        let mut builder = ExtensionRegistryBuilder::new();
        builder.inference_engine(engine);
        builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
            base_path: self.store.clone(),
        }));
        builder.workdir_materializer(self.materializer.clone());
        if !without_provider {
            builder.remote_runner_provider(Arc::new(GitWorktreeRunnerProvider::new(
                self.root.clone(),
            )));
        }
        builder.tool_contributor(
            roder_tools::builtin_coding_tools_contributor(self.repo.clone()).unwrap(),
        );
        Arc::new(
            Runtime::new(
                builder.build().unwrap(),
                RuntimeConfig {
                    workspace: Some(self.repo.display().to_string()),
                    ..RuntimeConfig::default()
                },
            )
            .unwrap(),
        )
    }

    fn request(&self, id: &str) -> WorkdirSelection {
        WorkdirSelection::Materialize(WorkdirRequest {
            repository: self.repo.clone(),
            selector: None,
            id: Some(id.to_string()),
        })
    }

    fn thread_request(&self) -> CreateThreadRequest {
        CreateThreadRequest::in_workspace(self.repo.display().to_string())
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
        let envelope = tokio::time::timeout(Duration::from_secs(20), events.recv())
            .await
            .unwrap()
            .unwrap();
        if envelope.thread_id != thread_id {
            continue;
        }
        let done = envelope.event.is_terminal();
        if let RoderEvent::TurnFailed(failed) = &envelope.event {
            panic!("turn failed: {}", failed.error);
        }
        seen.push(envelope);
        if done {
            return seen;
        }
    }
}

#[tokio::test]
async fn a_worktree_thread_sees_its_files_and_writes_only_there() {
    let world = World::new();
    let runtime = world.runtime(
        ScriptedEngine::new(vec![
            tool_round(&[
                ("read", "read_file", r#"{"path":"README.md"}"#),
                (
                    "write",
                    "write_file",
                    r#"{"path":"agent.txt","content":"from the agent\n"}"#,
                ),
                ("pwd", "exec_command", r#"{"cmd":"pwd"}"#),
            ]),
            final_round("done"),
        ]),
        false,
    );
    let thread = runtime
        .create_thread_in_workdir(world.thread_request(), world.request("w1"))
        .await
        .unwrap();
    let checkout = world.root.join("w1").join("checkout");
    let seen = run_turn(&runtime, &thread.thread_id, "look and write").await;

    let outputs: Vec<(String, String, bool)> = seen
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::ToolCallCompleted(call) => Some((
                call.call_id.clone(),
                call.output.clone().unwrap_or_default(),
                call.is_error,
            )),
            _ => None,
        })
        .collect();
    assert!(
        outputs.iter().all(|(_, _, is_error)| !is_error),
        "{outputs:?}"
    );
    assert!(
        outputs
            .iter()
            .any(|(id, out, _)| id == "read" && out.contains("hello"))
    );
    let canonical = std::fs::canonicalize(&checkout).unwrap();
    assert!(
        outputs
            .iter()
            .any(|(id, out, _)| id == "pwd" && out.contains(&canonical.display().to_string())),
        "{outputs:?}"
    );
    assert_eq!(
        std::fs::read_to_string(checkout.join("agent.txt")).unwrap(),
        "from the agent\n"
    );
    assert!(!world.repo.join("agent.txt").exists());
    let info = world.materializer.get("w1").await.unwrap();
    assert_eq!(
        info.primary_thread_id.as_deref(),
        Some(thread.thread_id.as_str())
    );
    assert_eq!(info.cleanliness, Some(Cleanliness::Dirty));
}

#[tokio::test]
async fn archiving_and_deleting_a_thread_keep_its_worktree_active_and_unbound() {
    let world = World::new();
    let runtime = world.runtime(ScriptedEngine::new(vec![final_round("ok")]), false);
    let thread = runtime
        .create_thread_in_workdir(world.thread_request(), world.request("w2"))
        .await
        .unwrap();
    run_turn(&runtime, &thread.thread_id, "hi").await;
    runtime.archive_thread(&thread.thread_id).await.unwrap();
    assert_eq!(
        world.materializer.get("w2").await.unwrap().status,
        WorkdirStatus::Active
    );
    runtime.delete_thread(&thread.thread_id).await.unwrap();
    assert!(
        runtime
            .load_thread(&thread.thread_id)
            .await
            .unwrap()
            .is_none()
    );

    let info = world.materializer.get("w2").await.unwrap();
    assert_eq!(info.status, WorkdirStatus::Active);
    assert_eq!(info.cleanliness, Some(Cleanliness::Clean));
    assert_eq!(info.primary_thread_id, None);
    // Unbound, so explicit cleanup is allowed now.
    world.materializer.cleanup("w2").await.unwrap();
    assert_eq!(
        world.materializer.get("w2").await.unwrap().status,
        WorkdirStatus::NotFound
    );
}

#[tokio::test]
async fn a_failed_thread_creation_rolls_back_a_new_worktree_but_keeps_a_claimed_one() {
    let world = World::new();
    // Without the worktree runner provider, binding the thread fails after
    // the worktree was materialized.
    let runtime = world.runtime(ScriptedEngine::new(Vec::new()), true);
    let error = runtime
        .create_thread_in_workdir(world.thread_request(), world.request("w3"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("is not installed"), "{error}");
    let left: Vec<_> = std::fs::read_dir(&world.root)
        .map(|entries| entries.map(|entry| entry.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "the root should be empty, found {left:?}");

    let existing = world
        .materializer
        .materialize(WorkdirRequest {
            repository: world.repo.clone(),
            selector: None,
            id: Some("w4".to_string()),
        })
        .await
        .unwrap();
    let claim = WorkdirSelection::Claim(WorkdirClaim {
        id: "w4".to_string(),
        relative_cwd: None,
    });
    assert!(
        runtime
            .create_thread_in_workdir(world.thread_request(), claim)
            .await
            .is_err()
    );
    let info = world.materializer.get("w4").await.unwrap();
    assert_eq!(info.status, WorkdirStatus::Active);
    assert_eq!(info.primary_thread_id, None);
    assert!(existing.info.checkout.join("README.md").exists());
}

#[tokio::test]
async fn three_threads_in_three_worktrees_work_at_once_and_their_patches_apply() {
    let world = World::new();
    let engine = ScriptedEngine::new(Vec::new());
    let runtime = world.runtime(engine.clone(), false);
    let mut threads = Vec::new();
    for index in 0..3 {
        let id = format!("par{index}");
        let thread = runtime
            .create_thread_in_workdir(world.thread_request(), world.request(&id))
            .await
            .unwrap();
        threads.push((id, thread.thread_id));
    }
    // One scripted round per thread, served in whatever order the turns ask,
    // so which checkout gets which file is decided at run time.
    for index in 0..3 {
        let arguments = format!(r#"{{"path":"file{index}.txt","content":"work {index}\n"}}"#);
        engine.push_round(tool_round(&[("w", "write_file", arguments.as_str())]));
    }
    let turns = threads
        .iter()
        .map(|(_, thread_id)| run_turn(&runtime, thread_id, "write your file"));
    futures::future::join_all(turns).await;

    let mut written = BTreeSet::new();
    for (id, _) in &threads {
        let checkout = world.root.join(id).join("checkout");
        let files: Vec<String> = std::fs::read_dir(&checkout)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("file"))
            .collect();
        assert_eq!(
            files.len(),
            1,
            "{id} should hold exactly one agent file: {files:?}"
        );
        written.insert(files[0].clone());
    }
    assert_eq!(written.len(), 3, "each edit landed in its own checkout");
    assert!(!world.repo.join("file0.txt").exists());

    for (id, _) in &threads {
        let patch = world.materializer.export_patch(id).await.unwrap();
        let patch_file = world.root.join(format!("{id}.patch"));
        std::fs::write(&patch_file, &patch).unwrap();
        git(&world.repo, &["apply", patch_file.to_str().unwrap()]);
    }
    for name in &written {
        assert!(
            world.repo.join(name).exists(),
            "{name} applied to the source"
        );
    }
}

#[tokio::test]
async fn a_follower_reading_by_cursor_sees_every_event_once_across_a_restart() {
    let world = World::new();
    let engine = ScriptedEngine::new(vec![
        tool_round(&[("a", "exec_command", r#"{"cmd":"echo one"}"#)]),
        tool_round(&[("b", "exec_command", r#"{"cmd":"echo two"}"#)]),
        final_round("first turn done"),
    ]);
    let runtime = world.runtime(engine.clone(), false);
    let thread_id = runtime
        .create_thread_in_workdir(world.thread_request(), world.request("follow"))
        .await
        .unwrap()
        .thread_id;

    // The follower: read the log after its cursor, then follow the bus,
    // dropping what it already has.
    let mut bus = runtime.subscribe_events();
    let mut cursor = 0;
    let mut seen: Vec<EventEnvelope> = Vec::new();
    runtime
        .start_turn(StartTurnRequest::new(&thread_id, "go"))
        .await
        .unwrap();
    let page = runtime
        .read_thread_events(&thread_id, cursor)
        .await
        .unwrap();
    cursor = page.next_cursor;
    seen.extend(page.events);
    loop {
        let envelope = tokio::time::timeout(Duration::from_secs(20), bus.recv())
            .await
            .unwrap()
            .unwrap();
        if envelope.thread_id != thread_id || envelope.seq <= cursor {
            continue;
        }
        cursor = envelope.seq;
        let done = envelope.event.is_terminal();
        seen.push(envelope);
        if done {
            break;
        }
    }

    // A new runtime over the same store; the follower resumes by cursor.
    drop(bus);
    drop(runtime);
    engine.push_round(final_round("second turn done"));
    let restarted = world.runtime(engine, false);
    let mut bus = restarted.subscribe_events();
    restarted
        .start_turn(StartTurnRequest::new(&thread_id, "again"))
        .await
        .unwrap();
    let page = restarted
        .read_thread_events(&thread_id, cursor)
        .await
        .unwrap();
    cursor = page.next_cursor;
    seen.extend(page.events);
    if !seen.last().is_some_and(|envelope| {
        matches!(&envelope.event, RoderEvent::TurnCompleted(done) if done.final_message.as_deref() == Some("second turn done"))
    }) {
        loop {
            let envelope = tokio::time::timeout(Duration::from_secs(20), bus.recv())
                .await
                .unwrap()
                .unwrap();
            if envelope.thread_id != thread_id || envelope.seq <= cursor {
                continue;
            }
            cursor = envelope.seq;
            let done = envelope.event.is_terminal();
            seen.push(envelope);
            if done {
                break;
            }
        }
    }

    let seqs: Vec<u64> = seen.iter().map(|envelope| envelope.seq).collect();
    let expected: Vec<u64> = (1..=cursor).collect();
    assert_eq!(seqs, expected, "every event exactly once, in seq order");
    let persisted = restarted.read_thread_events(&thread_id, 0).await.unwrap();
    assert_eq!(persisted.events, seen);
    let completions = seen
        .iter()
        .filter(|envelope| matches!(envelope.event, RoderEvent::TurnCompleted(_)))
        .count();
    assert_eq!(completions, 2);
}

#[tokio::test]
async fn a_worktree_thread_can_run_as_a_profile() {
    let world = World::new();
    let engine = ScriptedEngine::new(vec![
        tool_round(&[("c1", "write_file", r#"{"path":"notes.md","content":"no"}"#)]),
        final_round("reviewed"),
    ]);
    let runtime = world.runtime(engine.clone(), false);
    let reviewer = roder_api::profile::ProfileSnapshot {
        selector: "reviewer".into(),
        canonical: "reviewer".into(),
        name: "reviewer".into(),
        instructions: "You review in a worktree.".into(),
        disallowed_tools: vec!["write_file".into()],
        runner: Some("sandbox".into()),
        ..Default::default()
    };
    let thread = runtime
        .create_thread_in_workdir_with(
            world.thread_request(),
            world.request("reviewing"),
            Some((Default::default(), reviewer)),
        )
        .await
        .unwrap();
    let profile = thread.profile.clone().unwrap();
    assert_eq!(profile.canonical, "reviewer");
    assert_eq!(
        profile
            .overrides
            .iter()
            .map(|o| o.field.as_str())
            .collect::<Vec<_>>(),
        ["runner"],
        "the worktree is the thread's runner"
    );
    let info = world.materializer.get("reviewing").await.unwrap();
    assert_eq!(
        info.primary_thread_id.as_deref(),
        Some(thread.thread_id.as_str())
    );

    let seen = run_turn(&runtime, &thread.thread_id, "review").await;
    let refused = seen.iter().any(
        |envelope| matches!(&envelope.event, RoderEvent::ToolCallCompleted(done) if done.is_error),
    );
    assert!(refused, "the denied tool's call is an error result");
    assert!(!info.checkout.join("notes.md").exists());
    let offered: Vec<String> = engine.requests()[0]
        .tools
        .iter()
        .map(|tool| tool.name.clone())
        .collect();
    assert!(!offered.contains(&"write_file".to_string()), "{offered:?}");
    assert!(
        engine.requests()[0]
            .developer_context
            .as_deref()
            .unwrap()
            .contains("You review in a worktree.")
    );
}
