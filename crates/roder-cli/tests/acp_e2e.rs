//! `roder acp` driven by the official ACP Python SDK (PyPI
//! `agent-client-protocol`, in `~/.cache/roder-ci/venv-acp`, installed by
//! `.ci/run`) as the editor, against the fake model server: every method,
//! approvals answered in the editor, cancel while a permission request is
//! open, `session/load` in a new process, an editor-declared MCP server, a
//! docker-runner session, a worktree session, garbage lines, and stdout holding only JSON-RPC
//! (checked line by line on a `tee` of it).
//!
//! The scenarios live in `acp_client.py`; each test sets up the model's
//! script and the home, runs one scenario and checks what it reports.

mod docker_support;
mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::{Value, json};
use support::{installed, write_config};

/// The venv `.ci/run` makes, with the SDK in it.
fn sdk_python() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let python = Path::new(&home).join(".cache/roder-ci/venv-acp/bin/python");
    let python_text = python.display().to_string();
    installed(
        &python_text,
        &["-c", "import acp"],
        "python3 -m venv ~/.cache/roder-ci/venv-acp && ~/.cache/roder-ci/venv-acp/bin/pip install agent-client-protocol==0.12.1",
    )
    .then_some(python)
}

fn home_with(model: &FakeModelServer, extra: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), model, None);
    let path = home.path().join("config.toml");
    let mut config = std::fs::read_to_string(&path).unwrap();
    config.push_str(extra);
    std::fs::write(path, config).unwrap();
    home
}

/// What one run of the client reported, and every line `roder acp` wrote
/// on stdout.
struct Run {
    summary: Value,
    stdout_lines: Vec<Value>,
}

async fn client(
    python: &Path,
    scenario: &str,
    home: &Path,
    workspace: &Path,
    extra: &[&str],
) -> Run {
    client_with_env(python, scenario, home, workspace, extra, &[]).await
}

/// [`client`] with more environment for the client and `roder acp`.
async fn client_with_env(
    python: &Path,
    scenario: &str,
    home: &Path,
    workspace: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let raw = tempfile::NamedTempFile::new().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_client.py");
    let child = tokio::process::Command::new(python)
        .arg(script)
        .arg(scenario)
        .args(["--roder", env!("CARGO_BIN_EXE_roder")])
        .arg("--workspace")
        .arg(workspace)
        .arg("--raw")
        .arg(raw.path())
        .args(extra)
        .env("RODER_HOME", home)
        .env("FAKE_MODEL_KEY", "test-key")
        .envs(env.iter().copied())
        .env_remove("RODER_MODEL")
        .stdout(std::process::Stdio::piped())
        // ACP_E2E_STDERR=1 shows the client's and the agent's stderr live.
        .stderr(if std::env::var_os("ACP_E2E_STDERR").is_some() {
            std::process::Stdio::inherit()
        } else {
            std::process::Stdio::piped()
        })
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the client finishes within 180 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{scenario} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let summary: Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}"))
        .unwrap_or_else(|error| panic!("no summary ({error}) in:\n{stdout}\nstderr:\n{stderr}"));
    eprintln!("{scenario}: {summary}");
    let written = std::fs::read_to_string(raw.path()).unwrap();
    let stdout_lines = written
        .lines()
        .map(|line| {
            let message: Value = serde_json::from_str(line)
                .unwrap_or_else(|error| panic!("a stdout line is not JSON ({error}): {line:?}"));
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            assert!(
                message.get("method").is_some()
                    || message.get("result").is_some()
                    || message.get("error").is_some(),
                "not a JSON-RPC message: {line}"
            );
            message
        })
        .collect();
    Run {
        summary,
        stdout_lines,
    }
}

fn error_codes(lines: &[Value]) -> Vec<(Value, i64)> {
    lines
        .iter()
        .filter_map(|line| Some((line["id"].clone(), line["error"]["code"].as_i64()?)))
        .collect()
}

#[tokio::test]
async fn every_method_prompt_content_and_garbage_lines() {
    let Some(python) = sdk_python() else { return };
    let model = FakeModelServer::start().await.unwrap();
    model.push(
        ChatStream::new()
            .reasoning("pondering")
            .text("Hello from roder")
            .finish("stop")
            .usage(120, 8)
            .done(),
    );
    let home = home_with(&model, "context_window = 100000\n");
    let workspace = tempfile::tempdir().unwrap();
    let run = client(&python, "basics", home.path(), workspace.path(), &[]).await;

    // The prompt's blocks reached the model as one message and an image.
    let body = model.model_requests()[0].body.to_string();
    assert!(body.contains("say hello"), "{body}");
    assert!(
        body.contains("PLAN-TEXT") && body.contains("file:///notes/plan.md"),
        "{body}"
    );
    assert!(
        body.contains("[@extra.md](file:///notes/extra.md)"),
        "{body}"
    );
    assert!(
        body.contains("data:image/png;base64,iVBORw0KGgo="),
        "{body}"
    );
    // The effort chosen in the session reached the request.
    assert_eq!(model.model_requests()[0].body["reasoning_effort"], "high");
    // Each garbage line got its error; nothing else failed.
    let errors = error_codes(&run.stdout_lines);
    assert!(errors.contains(&(Value::Null, -32700)), "{errors:?}");
    assert!(errors.contains(&(Value::Null, -32600)), "{errors:?}");
    assert!(errors.contains(&(json!("garbage-1"), -32601)), "{errors:?}");
    assert!(
        run.summary["afterClose"].as_str().is_some(),
        "{}",
        run.summary
    );
}

#[tokio::test]
async fn an_edit_is_announced_then_asked_allowed_written_and_rejected_not() {
    let Some(python) = sdk_python() else { return };
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-allow",
        "write_file",
        r#"{"path":"allowed.txt","content":"allowed\n"}"#,
    )]));
    model.push(ChatStream::text_reply("wrote it"));
    model.push(ChatStream::tool_calls_reply(&[(
        "call-reject",
        "write_file",
        r#"{"path":"rejected.txt","content":"rejected\n"}"#,
    )]));
    model.push(ChatStream::text_reply("fine"));
    let home = home_with(&model, "");
    let workspace = tempfile::tempdir().unwrap();
    let run = client(&python, "approvals", home.path(), workspace.path(), &[]).await;
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("allowed.txt")).unwrap(),
        "allowed\n"
    );
    assert!(!workspace.path().join("rejected.txt").exists());
    assert_eq!(
        run.summary["finals"],
        json!({"call-allow": "completed", "call-reject": "failed"})
    );
    let allow_always = run.summary["options"]["allow_always"].as_str().unwrap();
    assert!(allow_always.contains("allowed.txt"), "{allow_always}");
    // The rejection reached the model.
    let last = model.model_requests()[3].body.to_string();
    assert!(last.contains("rejected"), "{last}");
}

#[tokio::test]
async fn cancel_with_a_permission_open_ends_cancelled_and_the_next_prompt_works() {
    let Some(python) = sdk_python() else { return };
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-touch",
        "exec_command",
        r#"{"cmd":"touch cancelled.txt"}"#,
    )]));
    model.push(ChatStream::text_reply("still here"));
    let home = home_with(&model, "");
    let workspace = tempfile::tempdir().unwrap();
    client(&python, "cancel", home.path(), workspace.path(), &[]).await;
    assert!(!workspace.path().join("cancelled.txt").exists());
    assert_eq!(model.model_requests().len(), 2);
}

#[tokio::test]
async fn session_load_in_a_new_process_replays_calls_and_diffs_before_answering() {
    let Some(python) = sdk_python() else { return };
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-keep",
        "write_file",
        r#"{"path":"kept.txt","content":"kept\n"}"#,
    )]));
    model.push(ChatStream::tool_calls_reply(&[(
        "call-echo",
        "exec_command",
        r#"{"cmd":"echo replayed-output"}"#,
    )]));
    model.push(ChatStream::text_reply("all done"));
    model.push(ChatStream::text_reply("loaded and listening"));
    let home = home_with(&model, "");
    let workspace = tempfile::tempdir().unwrap();
    let first = client(&python, "write", home.path(), workspace.path(), &[]).await;
    let session = first.summary["sessionId"].as_str().unwrap().to_string();
    let second = client(
        &python,
        "load",
        home.path(),
        workspace.path(),
        &["--session", &session],
    )
    .await;
    let replayed = second.summary["replayed"].as_array().unwrap();
    assert_eq!(replayed[0], "user_message_chunk", "{replayed:?}");
    // The command's output was replayed with its call.
    let text = second
        .stdout_lines
        .iter()
        .map(Value::to_string)
        .collect::<String>();
    assert!(text.contains("replayed-output"));
}

#[tokio::test]
async fn an_mcp_server_the_editor_declares_is_used_by_the_model() {
    let Some(python) = sdk_python() else { return };
    if !installed(
        "mcp-server-time",
        &["--help"],
        "pip install mcp-server-time",
    ) {
        return;
    }
    let command = which("mcp-server-time");
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-time",
        "mcp__time__get_current_time",
        r#"{"timezone":"UTC"}"#,
    )]));
    model.push(ChatStream::text_reply("it is late"));
    // A host MCP server starts only where commands run unconfined.
    let home = home_with(&model, "\n[sandbox]\nmode = \"none\"\n");
    let workspace = tempfile::tempdir().unwrap();
    let run = client(
        &python,
        "mcp",
        home.path(),
        workspace.path(),
        &["--mcp-command", &command],
    )
    .await;
    let output = run.summary["output"].as_str().unwrap();
    assert!(output.contains("UTC"), "{output}");
    assert!(output.contains("datetime"), "{output}");
}

#[tokio::test]
async fn a_docker_runner_session_runs_its_commands_in_a_container() {
    let Some(python) = sdk_python() else { return };
    let Some(containers) = docker_support::docker_or_skip("acp docker runner").await else {
        return;
    };
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-where",
        "exec_command",
        r#"{"cmd":"test -f /.dockerenv && echo in-a-container; touch made-inside"}"#,
    )]));
    model.push(ChatStream::text_reply("checked"));
    let home = docker_support::home_with_docker_runner(
        &model.openai_base_url(),
        &containers,
        r#"cleanup = "delete-on-close""#,
    );
    let workspace = tempfile::tempdir().unwrap();
    let run = client(
        &python,
        "sandboxed",
        home.path(),
        workspace.path(),
        &["--runner", "box"],
    )
    .await;
    let output = run.summary["output"].as_str().unwrap();
    assert!(output.contains("in-a-container"), "{}", run.summary);
    assert!(!workspace.path().join("made-inside").exists());
    assert!(!containers.list().await.is_empty(), "no container was made");
}

#[tokio::test]
async fn a_worktree_session_leaves_the_checkout_untouched() {
    let Some(python) = sdk_python() else { return };
    let repository = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(repository.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repository.path().join("README"), "hi\n").unwrap();
    git(&["add", "README"]);
    git(&["commit", "-qm", "first"]);
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-where",
        "exec_command",
        r#"{"cmd":"pwd; touch made-inside"}"#,
    )]));
    model.push(ChatStream::text_reply("checked"));
    let home = home_with(&model, "");
    let run = client(
        &python,
        "sandboxed",
        home.path(),
        repository.path(),
        &["--worktree"],
    )
    .await;
    let output = run.summary["output"].as_str().unwrap();
    let under = |home: &Path| output.contains(&home.join("worktrees").display().to_string());
    assert!(
        under(home.path()) || under(&std::fs::canonicalize(home.path()).unwrap()),
        "{output} is not under the home's worktrees"
    );
    assert!(!repository.path().join("made-inside").exists());
}

fn which(program: &str) -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
        .display()
        .to_string()
}

/// The tools the model was offered in its last request, sorted.
fn offered_tools(model: &FakeModelServer) -> Vec<String> {
    offered_in(&model.model_requests().pop().unwrap())
}

/// The tools `request` offered, sorted.
fn offered_in(request: &roder_testkit::fake_models::RecordedModelRequest) -> Vec<String> {
    let mut offered: Vec<String> = request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_string))
        .collect();
    offered.sort_unstable();
    offered
}

/// A session's thread metadata as stored.
fn stored_metadata(home: &Path, session: &str) -> Value {
    let path = home.join("threads").join(session).join("metadata.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test]
async fn a_profile_session_runs_as_the_profile_and_keeps_it() {
    let Some(python) = sdk_python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::text_reply("Here is the plan."));
    let home = home_with(&model, "");
    let run = client(
        &python,
        "profiled",
        home.path(),
        workspace.path(),
        &["--profile", "builtin:plan"],
    )
    .await;
    assert_eq!(run.summary["mode"], "plan", "{}", run.summary);
    assert!(run.summary["answer"].as_str().unwrap().contains("the plan"));
    // The model was offered the profile's read-only tools, and told who
    // it is.
    assert_eq!(
        offered_tools(&model),
        ["glob", "grep", "list_files", "read_file"]
    );
    let request = model.model_requests().pop().unwrap();
    assert!(request.body.to_string().contains("answer with a plan"));
    // The snapshot is stored with the session's thread.
    let session = run.summary["sessionId"].as_str().unwrap();
    let metadata = stored_metadata(home.path(), session);
    assert_eq!(
        metadata["profile"]["canonical"], "builtin:plan",
        "{metadata}"
    );
}

#[tokio::test]
async fn the_profile_option_is_chosen_once_before_the_first_prompt() {
    let Some(python) = sdk_python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::text_reply("A plan."));
    let home = home_with(&model, "");
    let run = client(
        &python,
        "choose_profile",
        home.path(),
        workspace.path(),
        &[],
    )
    .await;
    let summary = &run.summary;
    assert_eq!(summary["before"]["profile"], "none", "{summary}");
    assert_eq!(summary["before"]["mode"], "default", "{summary}");
    assert_eq!(summary["after"]["profile"], "builtin:plan", "{summary}");
    assert_eq!(
        summary["after"]["mode"], "plan",
        "the profile set the mode: {summary}"
    );
    let second = summary["second"].as_str().unwrap();
    assert!(second.contains("chosen once"), "{summary}");
    assert_eq!(summary["modeUpdates"], json!(["plan"]), "{summary}");
    assert_eq!(
        offered_tools(&model),
        ["glob", "grep", "list_files", "read_file"]
    );
    let session = summary["sessionId"].as_str().unwrap();
    let metadata = stored_metadata(home.path(), session);
    assert_eq!(
        metadata["profile"]["canonical"], "builtin:plan",
        "{metadata}"
    );
}

#[tokio::test]
async fn a_prompt_with_a_traceparent_in_meta_continues_the_callers_trace() {
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";
    let Some(python) = sdk_python() else { return };
    let receiver = support::otlp::Receiver::start().await;
    let workspace = tempfile::tempdir().unwrap();
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::text_reply("traced."));
    let home = home_with(&model, "");
    let traceparent = format!("00-{TRACE}-{SPAN}-01");
    let run = client_with_env(
        &python,
        "traced",
        home.path(),
        workspace.path(),
        &["--traceparent", &traceparent],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)],
    )
    .await;
    let bad = run.summary["bad"].as_str().unwrap();
    assert!(bad.contains("_meta.traceparent"), "{}", run.summary);
    // `roder acp` exited (its stdin closed), exporting what it had.
    let spans = receiver.spans();
    let turns: Vec<_> = spans.iter().filter(|span| span.name == "turn").collect();
    assert_eq!(
        turns.len(),
        1,
        "one turn ran: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert_eq!(support::otlp::hex(&turns[0].trace_id), TRACE);
    assert_eq!(support::otlp::hex(&turns[0].parent_span_id), SPAN);
}

#[tokio::test]
async fn a_profiles_mcp_servers_start_with_its_sessions() {
    let Some(python) = sdk_python() else { return };
    if !installed(
        "mcp-server-time",
        &["--help"],
        "pip install mcp-server-time",
    ) {
        return;
    }
    let model = FakeModelServer::start().await.unwrap();
    model.push(ChatStream::tool_calls_reply(&[(
        "call-time",
        "mcp__time__get_current_time",
        r#"{"timezone":"UTC"}"#,
    )]));
    model.push(ChatStream::text_reply("it is late"));
    // A host MCP server starts only where commands run unconfined.
    let home = home_with(&model, "\n[sandbox]\nmode = \"none\"\n");
    std::fs::create_dir(home.path().join("profiles")).unwrap();
    std::fs::write(
        home.path().join("profiles/timekeeper.md"),
        format!(
            "+++\nname = \"timekeeper\"\n[mcp_servers.time]\ncommand = \"{}\"\n+++\nTell the time.\n",
            which("mcp-server-time")
        ),
    )
    .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let run = client(
        &python,
        "profiled",
        home.path(),
        workspace.path(),
        &["--profile", "timekeeper"],
    )
    .await;
    assert!(
        run.summary["answer"].as_str().unwrap().contains("late"),
        "{}",
        run.summary
    );
    let requests = model.model_requests();
    let first = offered_in(&requests[0]);
    assert!(
        first.contains(&"mcp__time__get_current_time".to_string()),
        "{first:?}"
    );
    // The call reached the server: its answer is in the next request.
    assert!(
        requests[1].body.to_string().contains("UTC"),
        "{}",
        requests[1].body
    );
}
