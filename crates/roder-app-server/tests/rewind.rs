//! `thread/rewindTargets`, `thread/rollback` and `thread/fork` through the
//! protocol, over a real WebSocket, with a local workspace in a real git
//! repository: the targets list the turns, a rollback restores the files
//! and later requests leave the undone turn out, a fork gets its own
//! worktree, and a rollback of a running thread is refused as busy.

mod support;

use std::path::Path;
use std::sync::Arc;

use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::transcript::TranscriptItem;
use roder_app_server::{WsServerConfig, bind_ws};
use roder_core::{Runtime, RuntimeConfig};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_ext_runner_git_worktree::{GitCheckpointer, GitWorktreeRunnerProvider};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::json;
use support::Client;

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=T", "-c", "user.email=t@example.invalid"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

#[tokio::test]
async fn rewind_targets_rollback_and_fork_over_the_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    let worktrees = dir.path().join("worktrees");

    let engine = ScriptedEngine::new(vec![
        tool_round(&[(
            "one",
            "write_file",
            r#"{"path":"one.txt","content":"turn one\n"}"#,
        )]),
        final_round("one written"),
        tool_round(&[(
            "two",
            "write_file",
            r#"{"path":"two.txt","content":"turn two\n"}"#,
        )]),
        final_round("two written"),
        final_round("three"),
        ScriptedRound::Hang,
    ]);
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine.clone());
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: dir.path().join("store"),
    }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(&repo).unwrap());
    builder.remote_runner_provider(Arc::new(GitWorktreeRunnerProvider::new(worktrees.clone())));
    builder.workspace_checkpointer(Arc::new(GitCheckpointer::new(worktrees.clone())));
    let runtime = Arc::new(
        Runtime::new(
            builder.build().unwrap(),
            RuntimeConfig {
                workspace: Some(repo.display().to_string()),
                ..RuntimeConfig::default()
            },
        )
        .unwrap(),
    );
    let server = bind_ws(runtime.clone(), WsServerConfig::default())
        .await
        .unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.serve());
    let mut client = Client::ws(addr, None).await.unwrap();
    client.initialize().await;

    let started = client
        .call(
            "thread/start",
            json!({"workspace": repo.display().to_string()}),
        )
        .await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();
    for message in ["first", "second"] {
        client
            .call(
                "turn/start",
                json!({"threadId": thread_id, "message": message}),
            )
            .await;
        client.events_until(&thread_id, "turn_completed").await;
    }
    assert!(repo.join("two.txt").exists());

    let targets = client
        .call("thread/rewindTargets", json!({"threadId": thread_id}))
        .await;
    let turns: Vec<u64> = targets["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|target| target["turn"].as_u64().unwrap())
        .collect();
    assert_eq!(turns, vec![0, 1], "{targets}");
    assert_eq!(targets["targets"][1]["message"], "first");
    assert_eq!(targets["targets"][1]["checkpoint"]["checkpointer"], "git");

    let fork = client
        .call("thread/fork", json!({"threadId": thread_id, "atTurn": 1}))
        .await;
    let fork_dir = fork["thread"]["runner"]["workspace"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(fork["thread"]["runner"]["providerId"], "git-worktree");
    assert!(Path::new(&fork_dir).join("one.txt").exists());
    assert!(!Path::new(&fork_dir).join("two.txt").exists());
    assert!(repo.join("two.txt").exists(), "the source is untouched");

    let rolled_back = client
        .call(
            "thread/rollback",
            json!({"threadId": thread_id, "toTurn": 1}),
        )
        .await;
    assert_eq!(rolled_back["toTurn"], 1);
    assert_eq!(rolled_back["rolledBackTurns"].as_array().unwrap().len(), 1);
    client.events_until(&thread_id, "thread_rolled_back").await;
    assert!(!repo.join("two.txt").exists());
    assert!(repo.join("one.txt").exists());

    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "third"}),
        )
        .await;
    client.events_until(&thread_id, "turn_completed").await;
    let request = engine.requests().last().cloned().unwrap();
    let users: Vec<&str> = request
        .transcript
        .iter()
        .filter_map(|item| match item {
            TranscriptItem::UserMessage { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(users, vec!["first", "third"]);

    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "hang"}),
        )
        .await;
    client.events_until(&thread_id, "inference_started").await;
    let busy = client
        .call_err(
            "thread/rollback",
            json!({"threadId": thread_id, "toTurn": 0}),
        )
        .await;
    assert_eq!(busy["code"], -32002, "{busy}");
    let bad = client
        .call_err("thread/rollback", json!({"threadId": thread_id}))
        .await;
    assert_eq!(bad["code"], -32602, "{bad}");
}
