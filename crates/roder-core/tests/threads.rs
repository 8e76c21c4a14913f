//! Thread-level behaviour: busy threads, reading events by cursor across
//! restarts, and settings the runtime refuses to ignore.

mod support;

use std::sync::Arc;

use roder_api::events::RoderEvent;
use roder_api::extension::ExtensionRegistryBuilder;
use roder_core::{Runtime, RuntimeConfig, RuntimeError, StartTurnRequest};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use support::{Harness, until_turn_ends};

#[tokio::test]
async fn input_for_a_busy_thread_is_refused_without_writing_anything() {
    let harness = Harness::new(vec![ScriptedRound::Hang]);
    let thread_id = harness.thread().await;
    let turn_id = harness.start(&thread_id, "first").await;
    harness.engine.wait_for_requests(1).await;
    let before = harness
        .runtime
        .read_thread_events(&thread_id, 0)
        .await
        .unwrap();

    let error = harness
        .runtime
        .start_turn(StartTurnRequest::new(&thread_id, "second"))
        .await
        .unwrap_err();
    assert_eq!(
        error.downcast_ref::<RuntimeError>(),
        Some(&RuntimeError::ThreadBusy {
            thread_id: thread_id.clone(),
            turn_id: turn_id.clone()
        })
    );
    assert!(error.to_string().contains("busy"));
    let after = harness
        .runtime
        .read_thread_events(&thread_id, 0)
        .await
        .unwrap();
    assert_eq!(before, after);
    harness
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap();
}

#[tokio::test]
async fn events_read_by_cursor_survive_a_restart() {
    let harness = Harness::new(vec![
        tool_round(&[("w", "write_file", r#"{"path":"a.txt","content":"a"}"#)]),
        final_round("one"),
        final_round("two"),
    ]);
    let thread_id = harness.thread().await;
    let mut events = harness.runtime.subscribe_events();
    harness.start(&thread_id, "first").await;
    let live = until_turn_ends(&mut events, &thread_id).await;

    let page = harness
        .runtime
        .read_thread_events(&thread_id, 0)
        .await
        .unwrap();
    assert_eq!(page.events.first().map(|event| event.seq), Some(1));
    assert!(matches!(page.events[0].event, RoderEvent::ThreadCreated(_)));
    assert_eq!(page.next_cursor, live.last().unwrap().seq);
    let tail = harness
        .runtime
        .read_thread_events(&thread_id, page.next_cursor - 2)
        .await
        .unwrap();
    assert_eq!(tail.events.len(), 2);
    let beyond = harness
        .runtime
        .read_thread_events(&thread_id, page.next_cursor + 1)
        .await
        .unwrap_err();
    assert!(matches!(
        beyond.downcast_ref::<RuntimeError>(),
        Some(RuntimeError::CursorOutOfRange { .. })
    ));

    // A new runtime over the same store continues the numbering.
    drop(events);
    let restarted = harness.restart();
    let mut events = restarted.subscribe_events();
    restarted
        .start_turn(StartTurnRequest::new(&thread_id, "second"))
        .await
        .unwrap();
    let second = until_turn_ends(&mut events, &thread_id).await;
    assert_eq!(second[0].seq, page.next_cursor + 1);
    let rest = restarted
        .read_thread_events(&thread_id, page.next_cursor)
        .await
        .unwrap();
    // The log holds everything but the transient deltas.
    let persisted: Vec<_> = second
        .into_iter()
        .filter(|envelope| !envelope.event.is_transient())
        .collect();
    assert_eq!(rest.events, persisted);
}

#[tokio::test]
async fn unknown_threads_are_reported_as_such() {
    let harness = Harness::new(Vec::new());
    let error = harness
        .runtime
        .start_turn(StartTurnRequest::new("nope", "hi"))
        .await
        .unwrap_err();
    assert_eq!(
        error.downcast_ref::<RuntimeError>(),
        Some(&RuntimeError::ThreadNotFound("nope".to_string()))
    );
}

fn build(config: RuntimeConfig) -> anyhow::Result<Runtime> {
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(ScriptedEngine::new(Vec::new()));
    Runtime::new(builder.build()?, config)
}

#[test]
fn runtime_new_rejects_settings_it_would_ignore() {
    for (config, field) in [
        (
            RuntimeConfig {
                team_data_dir: Some("/tmp/team".into()),
                ..RuntimeConfig::default()
            },
            "team_data_dir is not supported",
        ),
        (
            RuntimeConfig {
                roadmap_data_dir: Some("/tmp/roadmap".into()),
                ..RuntimeConfig::default()
            },
            "roadmap_data_dir is not supported",
        ),
        (
            RuntimeConfig {
                auto_compact_token_limit: Some(10),
                ..RuntimeConfig::default()
            },
            "auto_compact_token_limit must be at least",
        ),
        (
            RuntimeConfig {
                hosted_web_search: roder_api::inference::HostedWebSearchConfig { enabled: true },
                ..RuntimeConfig::default()
            },
            "hosted_web_search is not supported",
        ),
        (
            RuntimeConfig {
                default_provider: "openai".to_string(),
                ..RuntimeConfig::default()
            },
            "inference provider \"openai\" is not installed (installed: mock)",
        ),
    ] {
        let error = build(config)
            .err()
            .expect("the config must be rejected")
            .to_string();
        assert!(error.contains(field), "{error} should contain {field}");
    }
    build(RuntimeConfig::default()).unwrap();
}

#[test]
fn runtime_new_needs_an_inference_engine() {
    let error = Runtime::new(
        ExtensionRegistryBuilder::new().build().unwrap(),
        RuntimeConfig::default(),
    )
    .err()
    .unwrap();
    assert!(error.to_string().contains("no inference engine"));
}

#[tokio::test]
async fn thread_fields_the_runtime_does_not_support_are_rejected() {
    let runtime = Arc::new(build(RuntimeConfig::default()).unwrap());
    let mut request = roder_core::CreateThreadRequest::in_workspace("/tmp");
    request.selection_mode = Some("auto".to_string());
    let error = runtime.create_thread_with(request).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("selection_mode is not supported")
    );
}
