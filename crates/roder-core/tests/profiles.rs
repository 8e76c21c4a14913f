//! Threads started from a profile snapshot: what the model is offered, what
//! a call to a denied tool gets, the tool-call limit, a thread without a
//! workspace, and a restart before the first turn (the seed's pending
//! restore) using the stored snapshot.

mod support;

use roder_api::policy_mode::PolicyMode;
use roder_api::profile::{ProfileLimits, ProfileMcpServer, ProfileSnapshot};
use roder_core::{CreateThreadRequest, StartTurnRequest};
use roder_testkit::{final_round, tool_round};
use support::{Harness, completed_tools, until_turn_ends};

fn reviewer() -> ProfileSnapshot {
    ProfileSnapshot {
        selector: "reviewer".into(),
        canonical: "reviewer".into(),
        name: "reviewer".into(),
        instructions: "You are the reviewer profile.".into(),
        tools: vec!["read_file".into(), "write_file".into(), "grep".into()],
        disallowed_tools: vec!["write_file".into()],
        ..ProfileSnapshot::default()
    }
}

/// A thread in the harness's workspace, started as `profile`.
async fn started_as(
    harness: &Harness,
    profile: ProfileSnapshot,
) -> roder_api::thread::ThreadMetadata {
    harness
        .runtime
        .create_thread_with_profile(
            CreateThreadRequest::in_workspace(harness.workspace.path().display().to_string()),
            None,
            Default::default(),
            profile,
        )
        .await
        .unwrap()
}

fn tool_names(request: &roder_api::inference::AgentInferenceRequest) -> Vec<String> {
    let mut names: Vec<String> = request.tools.iter().map(|tool| tool.name.clone()).collect();
    names.sort();
    names
}

#[tokio::test]
async fn denied_tools_are_not_offered_and_calls_to_them_are_refused() {
    let harness = Harness::new(vec![
        tool_round(&[("c1", "write_file", r#"{"path":"x.txt","content":"no"}"#)]),
        final_round("ok"),
    ]);
    let thread = started_as(&harness, reviewer()).await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread.thread_id, "review").await;
    let seen = until_turn_ends(&mut events, &thread.thread_id).await;
    let requests = harness.engine.requests();
    assert_eq!(tool_names(&requests[0]), vec!["grep", "read_file"]);
    assert!(
        requests[0]
            .developer_context
            .as_deref()
            .unwrap()
            .contains("You are the reviewer profile.")
    );
    let results = completed_tools(&seen);
    assert!(results[0].is_error, "{results:?}");
    assert!(!harness.path("x.txt").exists());
}

#[tokio::test]
async fn a_restart_before_the_first_turn_uses_the_stored_snapshot() {
    let harness = Harness::new(vec![final_round("ok")]);
    let profile = ProfileSnapshot {
        policy_mode: Some(PolicyMode::Plan),
        mcp_servers: [(
            "docs".to_string(),
            ProfileMcpServer {
                url: Some("http://127.0.0.1:9/mcp".into()),
                bearer_token_env_var: Some("RODER_PROFILES_TEST_SECRET".into()),
                ..Default::default()
            },
        )]
        .into(),
        ..reviewer()
    };
    let thread = harness
        .runtime
        .create_thread_with_profile(
            CreateThreadRequest::in_workspace(harness.workspace.path().display().to_string()),
            None,
            Default::default(),
            profile.clone(),
        )
        .await
        .unwrap();
    // A new process: nothing but the store.
    let restarted = harness.restart();
    let stored = restarted.thread_metadata(&thread.thread_id).await.unwrap();
    assert_eq!(stored.profile.as_deref(), Some(&profile));
    assert_eq!(stored.approvals.mode, Some(PolicyMode::Plan));
    let mut events = restarted.subscribe_events();
    restarted
        .start_turn(StartTurnRequest::new(&thread.thread_id, "look"))
        .await
        .unwrap();
    until_turn_ends(&mut events, &thread.thread_id).await;
    let request = harness.engine.requests().pop().unwrap();
    assert_eq!(tool_names(&request), vec!["grep", "read_file"]);
    assert!(
        request
            .developer_context
            .unwrap()
            .contains("You are the reviewer profile.")
    );
    // The reference is stored, never a value.
    let metadata = std::fs::read_to_string(
        harness
            .store_dir
            .path()
            .join(&thread.thread_id)
            .join("metadata.json"),
    )
    .unwrap();
    assert!(metadata.contains("RODER_PROFILES_TEST_SECRET"));
}

#[tokio::test]
async fn without_a_workspace_a_profile_is_offered_no_file_or_command_tools() {
    let harness = Harness::new(vec![final_round("ok")]);
    harness.runtime.set_allow_local_workspaces(false);
    let profile = ProfileSnapshot {
        tools: Vec::new(),
        disallowed_tools: Vec::new(),
        ..reviewer()
    };
    let thread = started_as(&harness, profile).await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread.thread_id, "chat").await;
    until_turn_ends(&mut events, &thread.thread_id).await;
    let request = harness.engine.requests().pop().unwrap();
    for name in roder_api::tools::WORKSPACE_TOOL_NAMES {
        assert!(
            !request.tools.iter().any(|tool| tool.name == *name),
            "offered {name} without a workspace"
        );
    }
}

#[tokio::test]
async fn calls_past_the_profiles_limit_get_an_error_result() {
    let harness = Harness::new(vec![
        tool_round(&[("c1", "grep", r#"{"pattern":"x"}"#)]),
        tool_round(&[("c2", "grep", r#"{"pattern":"y"}"#)]),
        final_round("ok"),
    ]);
    let profile = ProfileSnapshot {
        limits: ProfileLimits {
            max_tool_calls: Some(1),
            turn_deadline_s: None,
        },
        ..reviewer()
    };
    let thread = started_as(&harness, profile).await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread.thread_id, "search").await;
    let seen = until_turn_ends(&mut events, &thread.thread_id).await;
    let results = completed_tools(&seen);
    assert_eq!(results.len(), 2);
    assert!(!results[0].is_error, "{results:?}");
    assert!(results[1].is_error);
    assert!(
        results[1]
            .output
            .as_deref()
            .unwrap_or_default()
            .contains("limit of 1 tool calls"),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_callers_model_and_mode_win_and_are_recorded() {
    let harness = Harness::new(vec![]);
    let profile = ProfileSnapshot {
        model: Some("mock/profile-model".into()),
        policy_mode: Some(PolicyMode::Plan),
        ..reviewer()
    };
    let mut request =
        CreateThreadRequest::in_workspace(harness.workspace.path().display().to_string());
    request.model = Some("flag-model".into());
    let approvals = roder_api::approval::ThreadApprovals {
        mode: Some(PolicyMode::Bypass),
        ..Default::default()
    };
    let thread = harness
        .runtime
        .create_thread_with_profile(request, None, approvals, profile)
        .await
        .unwrap();
    assert_eq!(thread.model.as_deref(), Some("flag-model"));
    assert_eq!(thread.approvals.mode, Some(PolicyMode::Bypass));
    let overrides = &thread.profile.unwrap().overrides;
    let fields: Vec<&str> = overrides.iter().map(|o| o.field.as_str()).collect();
    assert_eq!(fields, vec!["model", "policy_mode"]);

    let plain = harness
        .runtime
        .create_thread_with_profile(
            CreateThreadRequest::in_workspace(harness.workspace.path().display().to_string()),
            None,
            Default::default(),
            ProfileSnapshot {
                model: Some("mock/profile-model".into()),
                ..reviewer()
            },
        )
        .await
        .unwrap();
    assert_eq!(plain.provider.as_deref(), Some("mock"));
    assert_eq!(plain.model.as_deref(), Some("profile-model"));
}

/// A runtime with the `unix-local` runner provider and one named runner,
/// `local`, rooted at `root`.
fn runtime_with_named_runner(
    store: &std::path::Path,
    root: &std::path::Path,
) -> std::sync::Arc<roder_core::Runtime> {
    let mut builder = roder_api::extension::ExtensionRegistryBuilder::new();
    builder.inference_engine(roder_testkit::ScriptedEngine::new(vec![final_round("ok")]));
    builder.thread_store_factory(std::sync::Arc::new(
        roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory {
            base_path: store.to_path_buf(),
        },
    ));
    builder.remote_runner_provider(std::sync::Arc::new(
        roder_ext_runner_unix_local::UnixLocalRunnerProvider::default(),
    ));
    let root_text = root.display().to_string();
    let config = roder_core::RuntimeConfig {
        workspace: Some(root_text.clone()),
        named_runners: [(
            "local".to_string(),
            roder_core::ThreadRunnerSelection {
                provider_id: "unix-local".into(),
                config: serde_json::json!({ "root": root_text }),
                workspace: root_text,
                read_roots: Vec::new(),
            },
        )]
        .into(),
        ..roder_core::RuntimeConfig::default()
    };
    std::sync::Arc::new(roder_core::Runtime::new(builder.build().unwrap(), config).unwrap())
}

#[tokio::test]
async fn a_profile_runner_binds_the_thread_unless_the_caller_chose_one() {
    let store = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let runtime = runtime_with_named_runner(store.path(), &root);
    let in_root = || CreateThreadRequest::in_workspace(root.display().to_string());
    let sandboxed = ProfileSnapshot {
        runner: Some("local".into()),
        ..reviewer()
    };

    let thread = runtime
        .create_thread_with_profile(in_root(), None, Default::default(), sandboxed.clone())
        .await
        .unwrap();
    let binding = thread
        .runner_binding
        .expect("bound to the profile's runner");
    assert_eq!(binding.destination.provider_id, "unix-local");
    assert!(thread.profile.unwrap().overrides.is_empty());

    // The caller's runner wins, and the stored snapshot says so.
    let mut own = in_root();
    own.runner = Some(roder_core::ThreadRunnerSelection {
        provider_id: "unix-local".into(),
        config: serde_json::json!({ "root": root.display().to_string() }),
        workspace: root.display().to_string(),
        read_roots: Vec::new(),
    });
    let thread = runtime
        .create_thread_with_profile(own, None, Default::default(), sandboxed)
        .await
        .unwrap();
    let overrides = thread.profile.unwrap().overrides;
    assert_eq!(overrides.len(), 1, "{overrides:?}");
    assert_eq!(overrides[0].field, "runner");
    assert_eq!(overrides[0].profile_value.as_deref(), Some("local"));

    // A runner nobody configured is an error that names it; no thread.
    let before = runtime.list_threads().await.unwrap().len();
    let error = runtime
        .create_thread_with_profile(
            in_root(),
            None,
            Default::default(),
            ProfileSnapshot {
                runner: Some("gpu".into()),
                ..reviewer()
            },
        )
        .await
        .unwrap_err();
    let shown = format!("{error:#}");
    assert!(
        shown.contains("runner \"gpu\", which is not configured"),
        "{shown}"
    );
    assert!(shown.contains("configured: local"), "{shown}");
    assert_eq!(runtime.list_threads().await.unwrap().len(), before);
}

#[tokio::test]
async fn a_profile_set_before_the_first_turn_applies_as_if_started_with_it() {
    let harness = Harness::new(vec![
        tool_round(&[("c1", "write_file", r#"{"path":"x.txt","content":"no"}"#)]),
        final_round("ok"),
        final_round("second"),
    ]);
    let in_workspace =
        || CreateThreadRequest::in_workspace(harness.workspace.path().display().to_string());
    let thread = harness
        .runtime
        .create_thread_with(in_workspace())
        .await
        .unwrap();
    let set = harness
        .runtime
        .set_thread_profile(&thread.thread_id, reviewer())
        .await
        .unwrap();
    assert_eq!(set.profile.as_ref().unwrap().canonical, "reviewer");
    let stored = harness
        .runtime
        .load_thread(&thread.thread_id)
        .await
        .unwrap()
        .unwrap()
        .metadata;
    assert_eq!(
        stored.unwrap().profile,
        set.profile,
        "the snapshot is on disk"
    );

    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread.thread_id, "review").await;
    let seen = until_turn_ends(&mut events, &thread.thread_id).await;
    let requests = harness.engine.requests();
    assert_eq!(tool_names(&requests[0]), vec!["grep", "read_file"]);
    assert!(completed_tools(&seen)[0].is_error);
    assert!(!harness.path("x.txt").exists());

    // Once chosen, and only before the first turn.
    let again = harness
        .runtime
        .set_thread_profile(&thread.thread_id, reviewer())
        .await
        .unwrap_err();
    assert!(format!("{again:#}").contains("has run a turn"), "{again:#}");
    let fresh = harness
        .runtime
        .create_thread_with(in_workspace())
        .await
        .unwrap();
    harness
        .runtime
        .set_thread_profile(&fresh.thread_id, reviewer())
        .await
        .unwrap();
    let twice = harness
        .runtime
        .set_thread_profile(&fresh.thread_id, reviewer())
        .await
        .unwrap_err();
    assert!(format!("{twice:#}").contains("chosen once"), "{twice:#}");
    // A runner is bound at creation: a profile naming one is refused here.
    let plain = harness
        .runtime
        .create_thread_with(in_workspace())
        .await
        .unwrap();
    let with_runner = ProfileSnapshot {
        runner: Some("sandbox".into()),
        ..reviewer()
    };
    let refused = harness
        .runtime
        .set_thread_profile(&plain.thread_id, with_runner)
        .await
        .unwrap_err();
    assert!(
        format!("{refused:#}").contains("names runner"),
        "{refused:#}"
    );
    let untouched = harness
        .runtime
        .load_thread(&plain.thread_id)
        .await
        .unwrap()
        .unwrap()
        .metadata;
    assert!(untouched.unwrap().profile.is_none());
}
