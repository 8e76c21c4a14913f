//! `thread/start {profile}`: an embedded archive's profile decides what the
//! model is offered; a bad selector is invalid params naming `profile`.

mod support;

use base64::Engine;
use roder_testkit::final_round;
use serde_json::json;
use support::Harness;

fn archive() -> (roder_profiles::ArchiveRef, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("roder-bundle.toml"),
        "id = \"team\"\n[entrypoints]\nreviewer = \"reviewer.md\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("reviewer.md"),
        "---\nname: reviewer\ndescription: reviews\ntools: Read, Grep, Write\ndisallowedTools: Write\n---\nYou review over JSON-RPC.\n",
    )
    .unwrap();
    let (reference, bytes) = roder_profiles::pack(dir.path()).unwrap();
    (
        reference,
        base64::engine::general_purpose::STANDARD.encode(bytes),
    )
}

#[tokio::test]
async fn thread_start_with_an_embedded_archive_profile() {
    let harness = Harness::new(vec![final_round("ok")]);
    let mut client = harness.ws_client().await;
    client.initialize().await;
    let (reference, data) = archive();
    let started = client
        .call(
            "thread/start",
            json!({"profile": {"selector": "reviewer", "archive": {
                "data": data, "digest": reference.digest, "size": reference.size
            }}}),
        )
        .await;
    let thread_id = started["thread"]["threadId"].as_str().unwrap().to_string();
    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "review"}),
        )
        .await;
    client.events_until(&thread_id, "turn_completed").await;
    let request = harness.engine.requests().pop().unwrap();
    let mut offered: Vec<&str> = request
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect();
    offered.sort();
    assert_eq!(offered, vec!["grep", "read_file"]);
    assert!(
        request
            .developer_context
            .unwrap()
            .contains("You review over JSON-RPC.")
    );
    let stored = harness.runtime.thread_metadata(&thread_id).await.unwrap();
    let profile = stored.profile.unwrap();
    assert_eq!(profile.canonical, "reviewer");
    assert!(matches!(
        profile.source,
        roder_api::profile::ProfileSource::Archive { ref id, .. } if id == "team"
    ));

    let bad = client
        .call_err(
            "thread/start",
            json!({"profile": {"selector": "builtin:builtin:review"}}),
        )
        .await;
    let text = bad.to_string();
    assert!(text.contains("profile"), "{text}");
    assert!(text.contains("prefix twice"), "{text}");

    let wrong = client
        .call_err(
            "thread/start",
            json!({"profile": {"selector": "reviewer", "archive": {
                "data": "AAAA", "digest": reference.digest, "size": reference.size
            }}}),
        )
        .await;
    assert!(wrong.to_string().contains("size mismatch"), "{wrong}");
}
