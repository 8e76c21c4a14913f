//! `roder threads export ID --format atif` of a real thread, written by the
//! `roder` binary against a fake model server, checked by Harbor's own
//! validator (`python -m harbor.utils.trajectory_validator`, Harbor 0.25 in
//! the venv `.ci/run` makes with `integrations/harbor/install-harbor.sh`).
//! The thread has what a trajectory must carry: reasoning, tool calls and
//! their results, token usage, a compaction and an interrupted turn.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::Value;
use support::*;

/// The Python of the venv holding Harbor: `RODER_HARBOR_VENV`, or the one
/// `.ci/run` makes.
fn harbor_python() -> PathBuf {
    let venv = std::env::var_os("RODER_HARBOR_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/roder-ci/venv-harbor")
        });
    venv.join("bin/python")
}

fn validate(python: &Path, trajectory: &Path) -> std::process::Output {
    std::process::Command::new(python)
        .args(["-m", "harbor.utils.trajectory_validator"])
        .arg(trajectory)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_thread_with_calls_reasoning_a_compaction_and_an_interruption_exports_valid_atif() {
    let python = harbor_python();
    let python_text = python.display().to_string();
    if !installed(
        &python_text,
        &["-c", "import harbor.utils.trajectory_validator"],
        "integrations/harbor/install-harbor.sh",
    ) {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    let server = FakeModelServer::start().await.unwrap();
    write_config(home.path(), &server, None);

    // Turn 1: reasoning and a call, then the answer.
    server.push(
        ChatStream::new()
            .reasoning("I should look first.")
            .tool_call(0, "call-ls", "exec_command", &[r#"{"cmd":"echo listed"}"#])
            .finish("tool_calls")
            .usage_details(120, 12, 40, 5)
            .done(),
    );
    server.push(ChatStream::text_reply("All listed."));
    // Long enough for `threads compact` to have history to summarize (it
    // keeps the most recent quarter as it is).
    let prompt = format!("list the files {}", "please ".repeat(4000));
    let first = roder(home.path(), &root, &["exec", &prompt]).await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let thread_id = thread_id_from(&first.stderr);

    // A compaction between turns: the model's summary replaces the history.
    server.push(ChatStream::text_reply("Summary: the files were listed."));
    let compacted = roder(home.path(), &root, &["threads", "compact", &thread_id]).await;
    assert_eq!(compacted.code, Some(0), "{}", compacted.stderr);

    // Turn 2: a call that sleeps, interrupted by SIGTERM.
    let sleep = serde_json::json!({ "cmd": sleeping_tree(&root) }).to_string();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-sleep",
        "exec_command",
        &sleep,
    )]));
    let child = spawn_roder(
        home.path(),
        &root,
        &["exec", "--thread", &thread_id, "sleep a while"],
    );
    tree_pids(&root).await;
    send_signal(&child, libc::SIGTERM);
    let interrupted = finish(child).await;
    assert_eq!(interrupted.code, Some(143), "{}", interrupted.stderr);

    let exported = roder(
        home.path(),
        &root,
        &["threads", "export", &thread_id, "--format", "atif"],
    )
    .await;
    assert_eq!(exported.code, Some(0), "{}", exported.stderr);
    let file = home.path().join("trajectory.json");
    std::fs::write(&file, &exported.stdout).unwrap();
    let validated = validate(&python, &file);
    assert!(
        validated.status.success(),
        "Harbor's validator refused the export:\n{}{}\n{}",
        String::from_utf8_lossy(&validated.stdout),
        String::from_utf8_lossy(&validated.stderr),
        exported.stdout
    );

    let trajectory: Value = serde_json::from_str(&exported.stdout).unwrap();
    assert_eq!(trajectory["session_id"], thread_id);
    assert_eq!(trajectory["agent"]["name"], "roder");
    assert_eq!(trajectory["agent"]["model_name"], "fake/m");
    let steps = trajectory["steps"].as_array().unwrap();
    let agent_step_with = |call: &str| {
        steps
            .iter()
            .find(|step| step["tool_calls"][0]["tool_call_id"] == call)
            .unwrap_or_else(|| panic!("no step calls {call}: {trajectory:#}"))
    };
    let listing = agent_step_with("call-ls");
    assert_eq!(listing["reasoning_content"], "I should look first.");
    assert_eq!(listing["tool_calls"][0]["arguments"]["cmd"], "echo listed");
    assert_eq!(
        listing["observation"]["results"][0]["source_call_id"],
        "call-ls"
    );
    assert!(
        listing["observation"]["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("listed"),
        "{listing:#}"
    );
    assert_eq!(listing["metrics"]["prompt_tokens"], 120);
    assert_eq!(listing["metrics"]["cached_tokens"], 40);
    assert!(
        steps.iter().any(|step| step["message"] == "All listed."),
        "the final answer is a step: {trajectory:#}"
    );
    let system = |event: &str| {
        steps
            .iter()
            .find(|step| step["source"] == "system" && step["extra"]["event"] == event)
            .unwrap_or_else(|| panic!("no {event} step: {trajectory:#}"))
    };
    assert_eq!(
        system("context_compacted")["message"],
        "Summary: the files were listed."
    );
    system("turn_interrupted");
    let sleeping = agent_step_with("call-sleep");
    assert_eq!(
        sleeping["observation"]["results"][0]["source_call_id"],
        "call-sleep"
    );
    let totals = &trajectory["final_metrics"];
    // 120 + 10 (the answer) + 10 (the summary) + 10 (the sleeping call).
    assert_eq!(totals["total_prompt_tokens"], 150, "{totals}");
    assert_eq!(totals["total_steps"], steps.len());
    assert!(
        trajectory["notes"]
            .as_str()
            .is_some_and(|notes| notes.contains("interrupted")),
        "{trajectory:#}"
    );

    // A changed document is refused: the validator is really checking.
    let mut broken = trajectory.clone();
    broken["steps"][0]["step_id"] = Value::from(7);
    std::fs::write(&file, broken.to_string()).unwrap();
    assert!(!validate(&python, &file).status.success());
}

#[tokio::test]
async fn exporting_a_missing_thread_or_an_unknown_format_fails_clearly() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    write_config(home.path(), &server, None);
    let missing = roder(
        home.path(),
        workspace.path(),
        &["threads", "export", "no-such-thread"],
    )
    .await;
    assert_eq!(missing.code, Some(1));
    assert!(
        missing.stderr.contains("does not exist"),
        "{}",
        missing.stderr
    );
    let unknown = roder(
        home.path(),
        workspace.path(),
        &["threads", "export", "x", "--format", "html"],
    )
    .await;
    assert_eq!(unknown.code, Some(2), "{}", unknown.stderr);
}
