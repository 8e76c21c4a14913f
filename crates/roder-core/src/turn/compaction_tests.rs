use super::*;

fn call(id: &str) -> TranscriptItem {
    TranscriptItem::ToolCall {
        id: id.to_string(),
        name: "read".to_string(),
        arguments: "{}".to_string(),
    }
}

fn result(id: &str, bytes: usize) -> TranscriptItem {
    TranscriptItem::ToolResult {
        id: id.to_string(),
        name: "read".to_string(),
        output: "x".repeat(bytes),
        is_error: false,
    }
}

fn user(text: &str) -> TranscriptItem {
    TranscriptItem::UserMessage {
        text: text.to_string(),
        images: Vec::new(),
    }
}

#[test]
fn capped_text_keeps_head_and_tail_and_states_the_cut() {
    let text = format!("{}{}", "a".repeat(5_000), "b".repeat(5_000));
    let capped = cap_text(&text, 1_000);
    assert!(capped.starts_with(&"a".repeat(500)));
    assert!(capped.ends_with(&"b".repeat(500)));
    assert!(capped.contains("9000 bytes cut here"), "{capped}");
    assert_eq!(cap_text("short", 1_000), "short");
}

#[test]
fn capping_never_splits_a_character() {
    let text = "é".repeat(3_000);
    for max in [1, 2, 3, 999, 1_000, 1_001] {
        let capped = cap_text(&text, max);
        assert!(capped.contains("bytes cut here"));
    }
}

#[test]
fn cuts_never_separate_a_call_from_its_result() {
    let transcript = vec![
        user("go"),
        call("a"),
        call("b"),
        result("a", 10),
        result("b", 10),
        user("more"),
    ];
    let cuts = safe_cuts(&transcript);
    assert_eq!(cuts, vec![true, true, false, false, false, true, true]);
}

#[test]
fn the_recent_window_starts_at_a_safe_cut_within_its_budget() {
    let mut transcript = vec![user("go")];
    for index in 0..10 {
        let id = format!("c{index}");
        transcript.push(call(&id));
        transcript.push(result(&id, 1_000));
    }
    let start = recent_start(&transcript, 3_500);
    assert!(matches!(transcript[start], TranscriptItem::ToolCall { .. }));
    let kept: usize = transcript[start..].iter().map(item_bytes).sum();
    assert!(kept <= 3_500, "{kept}");
    assert!(kept > 2_000, "{kept}");
    // Nothing fits: the latest safe cut (the end), never a split pair.
    let big = vec![user("go"), call("a"), result("a", 10_000)];
    assert_eq!(recent_start(&big, 100), 3);
}

#[test]
fn pruning_stubs_old_outputs_and_keeps_recent_ones() {
    let mut transcript = vec![call("a"), result("a", 5_000), call("b"), result("b", 5_000)];
    assert_eq!(prune(&mut transcript, 2), 1);
    match &transcript[1] {
        TranscriptItem::ToolResult { output, .. } => {
            assert!(output.contains("5000 bytes removed"), "{output}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(transcript[3], result("b", 5_000));
}

#[test]
fn pieces_cover_the_history_in_order_at_safe_cuts() {
    let mut head = Vec::new();
    for index in 0..50 {
        let id = format!("c{index}");
        head.push(call(&id));
        head.push(result(&id, 400));
    }
    let split = pieces(&head, 2_000);
    assert!(split.len() > 5);
    let rejoined: Vec<TranscriptItem> = split.iter().flat_map(|p| p.iter().cloned()).collect();
    assert_eq!(rejoined, head);
    for piece in split {
        assert!(matches!(piece[0], TranscriptItem::ToolCall { .. }));
    }
}

#[test]
fn carried_user_messages_are_the_last_three_without_old_summaries() {
    let head = vec![
        user("one"),
        user("two"),
        user(&format!("{SUMMARY_PREFIX}old")),
        user("three"),
        user("four"),
    ];
    let carried = carried_user_messages(&head);
    assert_eq!(carried, vec![user("two"), user("three"), user("four")]);
}

/// Every cap over texts mixing 1- to 4-byte characters: no panic, the
/// result is valid, keeps a head and a tail of the text, and stays near the
/// cap (head and tail together never exceed it; the note is the overhead).
#[test]
fn capping_any_text_at_any_size_is_total_and_bounded() {
    let alphabet = ['a', 'é', '€', '😀'];
    for length in 0..40usize {
        let text: String = (0..length)
            .map(|i| alphabet[(i * 7 + length) % 4])
            .collect();
        for max in 0..=text.len() + 1 {
            let capped = cap_text(&text, max);
            if text.len() <= max {
                assert_eq!(capped, text);
                continue;
            }
            let note_start = capped.find("\n[... ").unwrap();
            let head = &capped[..note_start];
            let tail_start = capped.rfind(" ...]\n").unwrap() + " ...]\n".len();
            let tail = &capped[tail_start..];
            assert!(text.starts_with(head) && text.ends_with(tail));
            assert!(
                head.len() + tail.len() <= max,
                "{max} {}",
                head.len() + tail.len()
            );
        }
    }
}

/// An engine that counts `list_models` calls and lists a 10,000-token model.
struct Listing {
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl InferenceEngine for Listing {
    fn id(&self) -> String {
        "listing".to_string()
    }

    fn capabilities(&self) -> roder_api::inference::InferenceCapabilities {
        roder_api::inference::InferenceCapabilities::coding_agent_default()
    }

    async fn list_models(
        &self,
        _ctx: roder_api::inference::InferenceProviderContext<'_>,
    ) -> anyhow::Result<Vec<roder_api::inference::ModelDescriptor>> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(vec![roder_api::inference::ModelDescriptor {
            id: "m".to_string(),
            display_name: None,
            context_window: Some(10_000),
        }])
    }

    async fn stream_turn(
        &self,
        _ctx: InferenceTurnContext<'_>,
        _request: AgentInferenceRequest,
    ) -> anyhow::Result<roder_api::inference::InferenceEventStream> {
        anyhow::bail!("not used")
    }
}

#[tokio::test]
async fn the_window_is_listed_once_per_engine_and_sets_the_default_threshold() {
    let reliability = roder_api::inference::ReliabilityConfig::default();
    let listing = std::sync::Arc::new(Listing {
        calls: Default::default(),
    });
    let engine: std::sync::Arc<dyn InferenceEngine> = listing.clone();
    for _ in 0..3 {
        let limits = Limits::resolve(None, &engine, "m", &reliability).await;
        assert_eq!(limits.window, Some(10_000));
        assert_eq!(limits.threshold, Some(8_000));
    }
    assert_eq!(listing.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    let limits = Limits::resolve(Some(5_000), &engine, "other", &reliability).await;
    assert_eq!(
        limits,
        Limits {
            threshold: Some(5_000),
            window: None
        }
    );
    let other = std::sync::Arc::new(Listing {
        calls: Default::default(),
    });
    let other_engine: std::sync::Arc<dyn InferenceEngine> = other.clone();
    Limits::resolve(None, &other_engine, "m", &reliability).await;
    assert_eq!(other.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}
