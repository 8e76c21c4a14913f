//! `roder app-server` with MCP servers declared per thread
//! (`thread/start {mcpServers}`): the PyPI `mcp-server-time` is started for
//! one thread, a fake Chat Completions model calls its tool through a turn,
//! and another thread of the same process is never offered it. A server
//! that cannot start is a `failed` entry, not a failed thread; what reads
//! Roder's environment is refused before the thread exists; where the
//! thread's host commands are confined, a host server is not started.

mod support;

use std::path::Path;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::{Value, json};
use support::replica::Replica;
use support::{installed, write_config};

fn home_with(server: &FakeModelServer, sandbox: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), server, None);
    let mut config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    config.push_str(sandbox);
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    home
}

fn servers() -> Value {
    json!({
        "time": {
            "command": "mcp-server-time",
            "args": ["--local-timezone", "UTC"],
            "startupTimeoutSec": 90
        },
        "broken": {
            "command": "sh",
            "args": ["-c", "echo HIDDEN-STDERR >&2; exit 7"],
            "enabledTools": ["probe"]
        }
    })
}

fn source<'a>(sources: &'a Value, name: &str) -> &'a Value {
    sources
        .as_array()
        .unwrap()
        .iter()
        .find(|source| source["name"] == name)
        .unwrap_or_else(|| panic!("no source {name} in {sources}"))
}

async fn start_thread(replica: &mut Replica, workspace: &Path, params: Value) -> Value {
    let mut params = params;
    params["workspace"] = json!(workspace.to_str().unwrap());
    replica.call("thread/start", params).await.unwrap()
}

#[tokio::test]
async fn a_thread_calls_its_own_mcp_server_and_another_thread_never_sees_it() {
    if !installed(
        "mcp-server-time",
        &["--help"],
        "pip install mcp-server-time",
    ) {
        return;
    }
    let model = FakeModelServer::start().await.unwrap();
    let home = home_with(&model, "\n[sandbox]\nmode = \"none\"\n");
    let workspace = tempfile::tempdir().unwrap();
    let mut replica = Replica::start(home.path(), workspace.path(), &[]).await;

    // Reading Roder's own environment is refused before any thread exists.
    let leaky = replica
        .call(
            "thread/start",
            json!({"mcpServers": {"leak": {"command": "env", "envVars": ["FAKE_MODEL_KEY"]}}}),
        )
        .await
        .unwrap_err();
    assert_eq!(leaky["code"], -32602, "{leaky}");
    assert!(
        leaky["message"]
            .as_str()
            .unwrap()
            .contains("mcpServers.leak: envVars"),
        "{leaky}"
    );
    let threads = replica.call("thread/list", json!({})).await.unwrap();
    assert_eq!(threads["threads"], json!([]), "no thread was made");

    let started = start_thread(
        &mut replica,
        workspace.path(),
        json!({"mcpServers": servers()}),
    )
    .await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();
    let time = source(&started["toolSources"], "time");
    assert_eq!(time["state"], "ready", "{started}");
    assert!(
        time["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__time__convert_time")),
        "{time}"
    );
    let broken = source(&started["toolSources"], "broken");
    assert_eq!(broken["state"], "failed", "{started}");
    assert_eq!(broken["tools"], json!(["mcp__broken__probe"]));
    assert!(!started.to_string().contains("HIDDEN-STDERR"), "{started}");

    model.push(ChatStream::tool_calls_reply(&[(
        "call-time",
        "mcp__time__convert_time",
        r#"{"source_timezone":"UTC","time":"09:30","target_timezone":"Asia/Kolkata"}"#,
    )]));
    model.push(ChatStream::text_reply("It is 15:00 in Kolkata."));
    replica
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "what time is it in Kolkata?"}),
        )
        .await
        .unwrap();
    let events = replica.events_until(&thread_id, "turn_completed").await;
    let kinds: Vec<&str> = events.iter().map(|(_, kind, _)| kind.as_str()).collect();
    assert!(kinds.contains(&"thread_tools_started"), "{kinds:?}");

    let other = start_thread(&mut replica, workspace.path(), json!({})).await;
    assert!(other.get("toolSources").is_none(), "{other}");
    let other_id = other["thread"]["threadId"].as_str().unwrap().to_string();
    model.push(ChatStream::text_reply("No clock here."));
    replica
        .call(
            "turn/start",
            json!({"threadId": other_id, "message": "time?"}),
        )
        .await
        .unwrap();
    replica.events_until(&other_id, "turn_completed").await;

    let requests = model.model_requests();
    assert_eq!(requests.len(), 3);
    let offered = requests[0].body["tools"].to_string();
    assert!(offered.contains("mcp__time__convert_time"), "{offered}");
    assert!(
        offered.contains("source_timezone"),
        "the server's schema: {offered}"
    );
    assert!(offered.contains("mcp__broken__probe"), "{offered}");
    let answer = requests[1].body.to_string();
    assert!(
        answer.contains("15:00"),
        "the converted time reaches the model: {answer}"
    );
    let elsewhere = requests[2].body["tools"].to_string();
    assert!(
        !elsewhere.contains("mcp__"),
        "the other thread: {elsewhere}"
    );
    assert!(elsewhere.contains("exec_command"), "{elsewhere}");
}

#[tokio::test]
async fn where_host_commands_are_confined_a_declared_host_server_is_not_started() {
    let model = FakeModelServer::start().await.unwrap();
    let home = home_with(&model, "");
    let workspace = tempfile::tempdir().unwrap();
    let marker = workspace.path().join("started");
    let mut replica = Replica::start(home.path(), workspace.path(), &[]).await;
    let started = start_thread(
        &mut replica,
        workspace.path(),
        json!({"mcpServers": {"here": {"command": "touch", "args": [marker.to_str().unwrap()]}}}),
    )
    .await;
    let here = source(&started["toolSources"], "here");
    assert_eq!(here["state"], "failed", "{started}");
    assert!(
        here["error"]
            .as_str()
            .unwrap()
            .contains("confined by the sandbox policy"),
        "{here}"
    );
    assert!(!marker.exists(), "the command never ran");

    // `thread/resume` declares them again (after a restart, say).
    let thread_id = started["thread"]["threadId"].as_str().unwrap();
    let resumed = replica
        .call(
            "thread/resume",
            json!({"threadId": thread_id, "mcpServers": {"here": {"url": "http://127.0.0.1:9/mcp"}}}),
        )
        .await
        .unwrap();
    assert_eq!(
        source(&resumed["toolSources"], "here")["state"],
        "failed",
        "{resumed}"
    );
}
