//! The sandbox policy's way from the runtime to tools and providers.

use std::sync::Arc;

use roder_api::extension::ExtensionRegistryBuilder;
use roder_api::remote_runner::RemoteRunnerProvider;
use roder_api::sandbox_policy::{NetworkAccess, SANDBOX_CONFIG_KEY, SandboxPolicy};
use roder_core::{CreateThreadRequest, Runtime, RuntimeConfig, ThreadRunnerSelection};
use roder_testkit::{MockRunnerProvider, ScriptedEngine};

fn runtime(provider: &MockRunnerProvider) -> Runtime {
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(ScriptedEngine::new(Vec::new()));
    builder.remote_runner_provider(Arc::new(provider.clone()));
    Runtime::new(
        builder.build().unwrap(),
        RuntimeConfig {
            credential_vars: vec!["MY_PROVIDER_KEY".into()],
            ..RuntimeConfig::default()
        },
    )
    .unwrap()
}

#[tokio::test]
async fn a_threads_policy_reaches_its_provider_without_credentials() {
    let provider = MockRunnerProvider::default();
    let runtime = runtime(&provider);
    let mut policy = SandboxPolicy {
        network: NetworkAccess::On,
        ..SandboxPolicy::default()
    };
    policy.env.pass = vec![
        "CARGO_HOME".into(),
        "OPENAI_API_KEY".into(),
        "MY_PROVIDER_KEY".into(),
    ];
    policy.env.set.insert("MY_PROVIDER_KEY".into(), "x".into());
    policy.env.set.insert("FLAG".into(), "1".into());
    let thread = runtime
        .create_thread_with_sandbox(
            CreateThreadRequest {
                runner: Some(ThreadRunnerSelection {
                    provider_id: provider.id(),
                    config: serde_json::json!({}),
                    workspace: "/mock/workspace".into(),
                    read_roots: Vec::new(),
                }),
                ..CreateThreadRequest::in_workspace("/tmp")
            },
            Some(policy.clone()),
        )
        .await
        .unwrap();
    assert_eq!(
        thread.sandbox.as_ref(),
        Some(&policy),
        "the thread keeps its own policy"
    );
    let binding = thread.runner_binding.unwrap();
    let sent: SandboxPolicy =
        serde_json::from_value(binding.destination.config[SANDBOX_CONFIG_KEY].clone()).unwrap();
    assert_eq!(sent.network, NetworkAccess::On);
    assert_eq!(sent.env.pass, vec!["CARGO_HOME".to_string()]);
    assert_eq!(sent.env.set.keys().collect::<Vec<_>>(), vec!["FLAG"]);
}

#[tokio::test]
async fn a_misspelt_destination_policy_fails_thread_creation() {
    let provider = MockRunnerProvider::default();
    let runtime = runtime(&provider);
    let error = runtime
        .create_thread_with(CreateThreadRequest {
            runner: Some(ThreadRunnerSelection {
                provider_id: provider.id(),
                config: serde_json::json!({"sandbox": {"netwrok": "on"}}),
                workspace: "/mock/workspace".into(),
                read_roots: Vec::new(),
            }),
            ..CreateThreadRequest::in_workspace("/tmp")
        })
        .await
        .expect_err("a typo is not a policy");
    assert!(error.to_string().contains("netwrok"), "{error:#}");
}
