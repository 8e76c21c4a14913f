//! Reasoning carried across processes, through the `roder` binary: one
//! `roder exec` gets signed Anthropic thinking (or an encrypted OpenAI
//! reasoning item) from the fake server, and a second `roder exec --thread`
//! — a new process that knows the thread only from its persisted log —
//! sends it back unchanged.

mod support;

use std::path::Path;

use roder_testkit::fake_models::{FakeModelServer, MessagesStream, ResponsesStream};
use serde_json::Value;
use support::{roder, thread_id_from};

const SIGNATURE: &str = "EqQBCkYIBxgCKkB+/signed-thinking==";
const ENCRYPTED: &str = "gAAAAB-encrypted-reasoning";

fn config(home: &Path, kind: &str, base_url: &str) {
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model = \"fake/m\"\nreasoning_effort = \"medium\"\n\n[providers.fake]\nkind = \"{kind}\"\nbase_url = \"{base_url}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n"
        ),
    )
    .unwrap();
}

/// Runs a turn, then continues the thread in a second process; returns the
/// second process's model request body.
async fn continued_in_a_new_process(server: &FakeModelServer, home: &Path) -> Value {
    let workspace = tempfile::tempdir().unwrap();
    let first = roder(home, workspace.path(), &["exec", "think, then answer"]).await;
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let thread_id = thread_id_from(&first.stderr);
    let before = server.model_requests().len();
    let second = roder(
        home,
        workspace.path(),
        &["exec", "--thread", &thread_id, "and now?"],
    )
    .await;
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    let requests = server.model_requests();
    assert_eq!(requests.len(), before + 1);
    requests[before].body.clone()
}

#[tokio::test]
async fn signed_thinking_reaches_the_next_process_unchanged() {
    let home = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    config(home.path(), "anthropic", &server.url());
    server.push(
        MessagesStream::new("msg_1")
            .thinking(&["The user ", "wants an answer."], SIGNATURE)
            .redacted_thinking("opaque-bytes")
            .text(&["Here it is."])
            .usage(50, 20)
            .stop("end_turn"),
    );
    server.push(MessagesStream::text_reply("msg_2", "Still here."));
    let body = continued_in_a_new_process(&server, home.path()).await;
    let assistant: Vec<&Value> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "assistant")
        .collect();
    assert_eq!(assistant.len(), 1, "{body}");
    let content = assistant[0]["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "thinking", "{body}");
    assert_eq!(content[0]["thinking"], "The user wants an answer.");
    assert_eq!(content[0]["signature"], SIGNATURE);
    assert_eq!(content[1]["type"], "redacted_thinking");
    assert_eq!(content[1]["data"], "opaque-bytes");
    assert_eq!(content[2]["type"], "text");
}

#[tokio::test]
async fn encrypted_reasoning_reaches_the_next_process_unchanged() {
    let home = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    config(home.path(), "openai-responses", &server.openai_base_url());
    server.push(
        ResponsesStream::new("resp_1")
            .reasoning_item(&[&["Thinking ", "it over."]], Some(ENCRYPTED))
            .message(&["Here it is."])
            .usage_details(50, 20, 0, 12)
            .completed(),
    );
    server.push(ResponsesStream::text_reply("resp_2", "Still here."));
    let body = continued_in_a_new_process(&server, home.path()).await;
    assert_eq!(
        body["include"],
        serde_json::json!(["reasoning.encrypted_content"]),
        "{body}"
    );
    let reasoning: Vec<&Value> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == "reasoning")
        .collect();
    assert_eq!(reasoning.len(), 1, "{body}");
    assert_eq!(reasoning[0]["encrypted_content"], ENCRYPTED);
    assert_eq!(body["reasoning"]["effort"], "medium");
}
