//! The `roder` binary end to end: `roder exec` in a temporary git repository
//! against a fake Chat Completions server scripting write_file →
//! exec_command → final answer, then `--thread` continuing the same thread.

mod support;

use std::path::Path;
use std::time::Duration;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::{git_repo, thread_id_from};

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn roder(home: &Path, workspace: &Path, args: &[&str]) -> Run {
    roder_with_key(home, workspace, args, true).await
}

#[tokio::test]
async fn exec_runs_tools_answers_on_stdout_and_continues_a_thread() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    git_repo(workspace.path());
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/test-model\"\n\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n",
            server.openai_base_url()
        ),
    )
    .unwrap();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-write",
        "write_file",
        r#"{"path":"hello.txt","content":"hello from roder\n"}"#,
    )]));
    server.push(ChatStream::tool_calls_reply(&[(
        "call-exec",
        "exec_command",
        r#"{"cmd":"cat hello.txt"}"#,
    )]));
    server.push(ChatStream::text_reply("Created hello.txt."));

    let first = roder(home.path(), workspace.path(), &["exec", "create hello.txt"]).await;
    assert_eq!(first.code, Some(0), "stderr:\n{}", first.stderr);
    assert_eq!(first.stdout, "Created hello.txt.\n");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("hello.txt")).unwrap(),
        "hello from roder\n"
    );
    assert!(
        first.stderr.contains("write_file hello.txt"),
        "{}",
        first.stderr
    );
    assert!(
        first.stderr.contains("exec_command cat hello.txt"),
        "{}",
        first.stderr
    );

    let requests = server.model_requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["model"], "test-model");
    let third = requests[2].body.to_string();
    assert!(
        third.contains("hello from roder"),
        "the exec output reaches the model"
    );

    let thread_id = thread_id_from(&first.stderr);
    server.push(ChatStream::text_reply("Still here."));
    let second = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "are you still there?"],
    )
    .await;
    assert_eq!(second.code, Some(0), "stderr:\n{}", second.stderr);
    assert_eq!(second.stdout, "Still here.\n");
    let continued = server.model_requests()[3].body.to_string();
    for earlier in [
        "create hello.txt",
        "Created hello.txt.",
        "call-write",
        "are you still there?",
    ] {
        assert!(
            continued.contains(earlier),
            "the earlier transcript is sent: {earlier}"
        );
    }

    let listed = roder(home.path(), workspace.path(), &["threads", "list"]).await;
    assert_eq!(listed.code, Some(0));
    assert!(listed.stdout.contains(&thread_id));
    let shown = roder(
        home.path(),
        workspace.path(),
        &["threads", "show", &thread_id],
    )
    .await;
    assert!(
        shown.stdout.contains("assistant: Still here."),
        "{}",
        shown.stdout
    );

    let deleted = roder(
        home.path(),
        workspace.path(),
        &["threads", "delete", &thread_id],
    )
    .await;
    assert_eq!(deleted.code, Some(0), "{}", deleted.stderr);
    let listed = roder(home.path(), workspace.path(), &["threads", "list"]).await;
    assert!(!listed.stdout.contains(&thread_id));
}

#[tokio::test]
async fn exec_json_prints_every_event_and_failures_exit_non_zero() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
            server.openai_base_url()
        ),
    )
    .unwrap();
    server.push(ChatStream::text_reply("json answer"));
    let run = roder(home.path(), workspace.path(), &["exec", "--json", "hi"]).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let events: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .collect();
    // Persisted events are numbered 1, 2, 3, ...; a streamed delta is
    // transient and repeats the seq of the event before it.
    let is_delta = |event: &serde_json::Value| event["event"]["type"] == "message_delta";
    let seqs: Vec<u64> = events
        .iter()
        .filter(|event| !is_delta(event))
        .map(|event| event["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.len() >= 5);
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(
        events.iter().any(is_delta),
        "deltas are shown: {}",
        run.stdout
    );
    assert!(
        run.stdout
            .lines()
            .last()
            .unwrap()
            .contains("turn_completed")
    );

    // Nothing scripted: the server answers 400, the turn fails, exit code 1.
    let failed = roder(home.path(), workspace.path(), &["exec", "again"]).await;
    assert_eq!(failed.code, Some(1));
    assert!(
        failed.stderr.contains("the turn failed"),
        "{}",
        failed.stderr
    );
}

#[tokio::test]
async fn config_errors_name_the_key_and_missing_keys_name_the_variable() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "modle = \"openai/x\"\n").unwrap();
    let run = roder(home.path(), workspace.path(), &["config", "show"]).await;
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("modle"), "{}", run.stderr);

    std::fs::write(
        home.path().join("config.toml"),
        "model = \"anthropic/claude-x\"\n",
    )
    .unwrap();
    let shown = roder(home.path(), workspace.path(), &["config", "show"]).await;
    assert_eq!(shown.code, Some(0));
    assert!(shown.stdout.contains("api_key_env = \"ANTHROPIC_API_KEY\""));
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(["exec", "hi"])
        .current_dir(workspace.path())
        .env("RODER_HOME", home.path())
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("RODER_MODEL")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
}

#[tokio::test]
async fn ctrl_c_interrupts_the_turn_and_saves_the_thread() {
    use roder_testkit::fake_models::FakeReply;

    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
            server.openai_base_url()
        ),
    )
    .unwrap();
    server.push(FakeReply::Hang);
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(["exec", "think forever"])
        .current_dir(workspace.path())
        .env("RODER_HOME", home.path())
        .env_remove("RODER_MODEL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The model request has arrived: the turn is running.
    server
        .wait_for_requests(1, Duration::from_secs(30))
        .await
        .unwrap();
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let thread_id = thread_id_from(&stderr);
    let events = std::fs::read_to_string(
        home.path()
            .join("threads")
            .join(&thread_id)
            .join("events.jsonl"),
    )
    .unwrap();
    assert!(events.lines().last().unwrap().contains("turn_interrupted"));
}

/// `roder ARGS` in `workspace`, with the fake provider's key variable set
/// or not.
async fn roder_with_key(home: &Path, workspace: &Path, args: &[&str], key: bool) -> Run {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"));
    command
        .args(args)
        .current_dir(workspace)
        .env("RODER_HOME", home)
        .env_remove("RODER_MODEL")
        .env_remove("FAKE_MODEL_KEY");
    if key {
        command.env("FAKE_MODEL_KEY", "test-key");
    }
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("roder should finish within 60 s")
        .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test]
async fn exec_refuses_what_cannot_work_before_creating_anything() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    git_repo(workspace.path());
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n",
            server.openai_base_url()
        ),
    )
    .unwrap();
    server.push(ChatStream::text_reply("Hello."));
    let first = roder_with_key(home.path(), workspace.path(), &["exec", "hi"], true).await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let thread = thread_id_from(&first.stderr);
    let events = home
        .path()
        .join("threads")
        .join(&thread)
        .join("events.jsonl");
    let events_before = std::fs::read(&events).unwrap();
    let listed = async || {
        let run = roder_with_key(home.path(), workspace.path(), &["threads", "list"], true).await;
        assert_eq!(run.code, Some(0), "{}", run.stderr);
        run.stdout
    };
    let listed_before = listed().await;
    assert!(listed_before.contains(&thread), "{listed_before}");

    for (args, key, says) in [
        (
            &["exec", "hi"][..],
            false,
            "needs an API key in FAKE_MODEL_KEY, which is not set; export FAKE_MODEL_KEY=",
        ),
        (
            &["exec", "--thread", &thread, "hi"],
            false,
            "FAKE_MODEL_KEY",
        ),
        (&["exec", "--worktree", "hi"], false, "FAKE_MODEL_KEY"),
        (
            &["--model", "nope/m", "exec", "hi"],
            true,
            "model provider \"nope\" is not configured",
        ),
        (
            &["--model", "fake/m 2", "exec", "hi"],
            true,
            "is not of the form provider/model",
        ),
        (
            &["exec", "--runner", "nowhere", "hi"],
            true,
            "runner \"nowhere\" is not configured",
        ),
    ] {
        let run = roder_with_key(home.path(), workspace.path(), args, key).await;
        assert_eq!(run.code, Some(1), "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
        assert_eq!(
            listed().await,
            listed_before,
            "{args:?} changed the threads"
        );
    }
    assert_eq!(std::fs::read(&events).unwrap(), events_before);
    assert_eq!(
        std::fs::read_dir(home.path().join("threads"))
            .unwrap()
            .count(),
        1,
        "no thread directory was made"
    );
    assert!(
        !home.path().join("worktrees").exists()
            || std::fs::read_dir(home.path().join("worktrees"))
                .unwrap()
                .next()
                .is_none(),
        "no worktree was made"
    );
    assert_eq!(server.model_requests().len(), 1, "no model request either");
}

/// `roder exec -` with `stdin` on standard input.
async fn roder_with_stdin(home: &Path, workspace: &Path, stdin: &[u8]) -> Run {
    use tokio::io::AsyncWriteExt as _;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(["exec", "-"])
        .current_dir(workspace)
        .env("RODER_HOME", home)
        .env("FAKE_MODEL_KEY", "test-key")
        .env_remove("RODER_MODEL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).await.unwrap();
    drop(input);
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("roder should finish within 60 s")
        .unwrap();
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test]
async fn exec_dash_reads_the_prompt_from_stdin_and_refuses_an_empty_one() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/test-model\"\n\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
            server.openai_base_url()
        ),
    )
    .unwrap();
    server.push(ChatStream::text_reply("Read it."));
    let prompt = "fix the bug\n\nthat `pkill -f roder` would hit\n";
    let run = roder_with_stdin(home.path(), workspace.path(), prompt.as_bytes()).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "Read it.\n");
    let body = server.model_requests()[0].body.to_string();
    assert!(
        body.contains(&serde_json::to_string(prompt).unwrap()),
        "the whole stdin is the user message: {body}"
    );

    let empty = roder_with_stdin(home.path(), workspace.path(), b"  \n").await;
    assert_eq!(empty.code, Some(1), "{}", empty.stderr);
    assert!(
        empty.stderr.contains("read no prompt from standard input"),
        "{}",
        empty.stderr
    );
    assert_eq!(server.model_requests().len(), 1, "nothing was sent");
    let threads = std::fs::read_dir(home.path().join("threads"))
        .unwrap()
        .count();
    assert_eq!(threads, 1, "the empty prompt made no thread");
}
