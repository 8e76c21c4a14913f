//! `env` in a docker-bound thread shows no credential, even when Roder's
//! own environment holds one and the policy asks to pass or set it. Its own
//! binary: it sets this process's environment, which no other test may be
//! reading at the time.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use roder_api::events::RoderEvent;
use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::sandbox_policy::SandboxPolicy;
use roder_core::{
    CreateThreadRequest, Runtime, RuntimeConfig, StartTurnRequest, ThreadRunnerSelection,
};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_testkit::{ScriptedEngine, final_round, tool_round};
use serde_json::json;
use support::*;

const SECRET: &str = "sk-escape-test-secret";

#[tokio::test]
async fn env_shows_no_credential_whatever_the_policy_says() {
    // SAFETY: the only test of this binary, before any thread reads the
    // environment.
    unsafe {
        std::env::set_var("OPENAI_API_KEY", SECRET);
        std::env::set_var("ANTHROPIC_API_KEY", SECRET);
        std::env::set_var("RODER_ESCAPE_PASSED", "passed-through");
    }
    let Some(provider) = provider("env_shows_no_credential_whatever_the_policy_says").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let docker = provider.docker().await.unwrap();
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let engine = ScriptedEngine::new(vec![
        tool_round(&[("e", "exec_command", r#"{"cmd": "env"}"#)]),
        final_round("done"),
    ]);
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine);
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(host.path()).unwrap());
    builder.remote_runner_provider(Arc::new(provider));
    let runtime = Arc::new(
        Runtime::new(
            builder.build().unwrap(),
            RuntimeConfig {
                workspace: Some(host.path().display().to_string()),
                ..RuntimeConfig::default()
            },
        )
        .unwrap(),
    );
    let mut policy = SandboxPolicy::default();
    policy.env.pass = vec![
        "OPENAI_API_KEY".to_string(),
        "RODER_ESCAPE_PASSED".to_string(),
    ];
    policy.env.set = BTreeMap::from([
        ("GITHUB_TOKEN".to_string(), SECRET.to_string()),
        ("MY_FLAG".to_string(), "1".to_string()),
    ]);
    let mut request = CreateThreadRequest::in_workspace(host.path().display().to_string());
    request.runner = Some(ThreadRunnerSelection {
        provider_id: "docker".to_string(),
        config: label.config(json!({})),
        workspace: "/workspace".to_string(),
        read_roots: Vec::new(),
    });
    let mut events = runtime.subscribe_events();
    let thread = runtime
        .create_thread_with_sandbox(request, Some(policy))
        .await
        .unwrap()
        .thread_id;
    runtime
        .start_turn(StartTurnRequest::new(&thread, "print the environment"))
        .await
        .unwrap();
    let output = loop {
        let envelope = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("the command finishes within 60 s")
            .unwrap();
        if let RoderEvent::ToolCallCompleted(call) = &envelope.event
            && envelope.thread_id == thread
        {
            break call.output.clone().unwrap_or_default();
        }
    };
    assert!(
        output.contains("RODER_ESCAPE_PASSED=passed-through"),
        "{output}"
    );
    assert!(output.contains("MY_FLAG=1"), "{output}");
    assert!(
        output.contains("PATH=/usr/local/sbin"),
        "the image's PATH: {output}"
    );
    for credential in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GITHUB_TOKEN",
        SECRET,
    ] {
        assert!(
            !output.contains(credential),
            "{credential} leaked: {output}"
        );
    }
    let containers = label.containers().await;
    assert_eq!(containers.len(), 1);
    let env = docker
        .inspect_container(&containers[0], None)
        .await
        .unwrap()
        .config
        .unwrap()
        .env
        .unwrap_or_default();
    assert!(
        env.iter().all(|entry| !entry.contains(SECRET)),
        "the container's own environment holds no credential: {env:?}"
    );
    drop(runtime);
}
