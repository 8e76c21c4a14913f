//! `roder mcp-server` driven by the `mcp` Python SDK's own client (a script
//! beside this test): a task run in a workspace returns the final answer and
//! the thread id, `continue_thread` runs that thread's next turn, and bad
//! requests are error results. The model is a fake Chat Completions server.

use std::path::Path;
use std::time::Duration;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::installed;

mod support;

fn have_sdk() -> bool {
    installed(
        "python3",
        &["-c", "import mcp.client.stdio"],
        "pip install mcp",
    )
}

#[tokio::test]
async fn the_python_sdk_client_runs_and_continues_a_task() {
    if !have_sdk() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let workspace_path = std::fs::canonicalize(workspace.path()).unwrap();
    let runner_root = tempfile::tempdir().unwrap();
    let runner_root_path = std::fs::canonicalize(runner_root.path()).unwrap();
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/test-model\"\n\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n\n[runners.local]\nprovider = \"unix-local\"\nconfig = {{ root = \"{}\" }}\n",
            server.openai_base_url(),
            runner_root_path.display()
        ),
    )
    .unwrap();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-write",
        "write_file",
        r#"{"path":"note.txt","content":"written through MCP\n"}"#,
    )]));
    server.push(ChatStream::text_reply("Wrote note.txt."));
    server.push(ChatStream::text_reply("Nothing else to do."));
    server.push(ChatStream::tool_calls_reply(&[(
        "call-runner",
        "write_file",
        r#"{"path":"in-runner.txt","content":"inside the runner\n"}"#,
    )]));
    server.push(ChatStream::text_reply("Wrote it in the runner."));

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("python3")
            .arg(&script)
            .arg(env!("CARGO_BIN_EXE_roder"))
            .arg(&workspace_path)
            .current_dir(home.path())
            .env("RODER_HOME", home.path())
            .env("FAKE_MODEL_KEY", "test-key")
            .env_remove("RODER_MODEL")
            .output(),
    )
    .await
    .expect("the client finishes within 120 s")
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr:\n{stderr}");
    let seen: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{error}: {}\n{stderr}",
            String::from_utf8_lossy(&output.stdout)
        )
    });

    let tools = &seen["tools"];
    assert_eq!(
        tools["run_task"]["properties"]["prompt"]["type"], "string",
        "{tools}"
    );
    assert!(
        tools["run_task"]["properties"]["workspace"].is_object(),
        "{tools}"
    );
    assert!(
        tools["continue_thread"]["properties"]["thread_id"].is_object(),
        "{tools}"
    );

    let first = &seen["first"];
    assert_eq!(first["is_error"], false, "{first}");
    assert_eq!(first["text"], "Wrote note.txt.");
    assert_eq!(first["structured"]["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(workspace_path.join("note.txt")).unwrap(),
        "written through MCP\n"
    );
    let thread_id = first["structured"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        home.path().join("threads").join(&thread_id).exists(),
        "the thread is saved in RODER_HOME"
    );

    let second = &seen["second"];
    assert_eq!(second["is_error"], false, "{second}");
    assert_eq!(second["text"], "Nothing else to do.");
    assert_eq!(second["structured"]["threadId"], thread_id.as_str());
    // The continued turn's request carries the first turn's history.
    let requests = server.model_requests();
    assert_eq!(requests.len(), 5);
    let third = requests[2].body.to_string();
    assert!(third.contains("written through MCP"), "{third}");
    assert!(third.contains("and now?"), "{third}");

    assert_eq!(seen["missing"]["is_error"], true);
    assert!(
        seen["missing"]["text"]
            .as_str()
            .unwrap()
            .contains("no-such-thread"),
        "{}",
        seen["missing"]
    );
    assert_eq!(seen["relative"]["is_error"], true);
    assert!(
        seen["relative"]["text"]
            .as_str()
            .unwrap()
            .contains("not an absolute path"),
        "{}",
        seen["relative"]
    );

    let in_runner = &seen["in_runner"];
    assert_eq!(in_runner["is_error"], false, "{in_runner}");
    assert_eq!(in_runner["text"], "Wrote it in the runner.");
    assert_eq!(
        std::fs::read_to_string(runner_root_path.join("in-runner.txt")).unwrap(),
        "inside the runner\n"
    );
    assert!(!workspace_path.join("in-runner.txt").exists());
    assert_eq!(seen["unknown_runner"]["is_error"], true);
    assert!(
        seen["unknown_runner"]["text"]
            .as_str()
            .unwrap()
            .contains("runner \"nope\" is not configured"),
        "{}",
        seen["unknown_runner"]
    );
}

#[tokio::test]
async fn a_task_past_its_timeout_is_interrupted_and_names_its_thread() {
    if !have_sdk() {
        return;
    }
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
    server.push(roder_testkit::fake_models::FakeReply::Hang);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("python3")
            .arg(&script)
            .arg(env!("CARGO_BIN_EXE_roder"))
            .arg(workspace.path())
            .arg("timeout")
            .env("RODER_HOME", home.path())
            .env_remove("RODER_MODEL")
            .output(),
    )
    .await
    .expect("the client finishes within 120 s")
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr:\n{stderr}");
    let seen: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["is_error"], true, "{seen}");
    assert_eq!(seen["structured"]["status"], "interrupted", "{seen}");
    let thread_id = seen["structured"]["threadId"].as_str().unwrap();
    assert!(seen["text"].as_str().unwrap().contains(thread_id), "{seen}");
    assert!(home.path().join("threads").join(thread_id).exists());
}
