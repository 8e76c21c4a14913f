//! Compaction: keeping a long thread's requests inside the model's context
//! window.
//!
//! When the next request would cross the thread's threshold (or the provider
//! refused one as too long), the transcript is rewritten in two steps, the
//! cheaper first:
//!
//! 1. **Pruning.** Tool outputs older than the recent window become a short
//!    stub saying what was cut. Often enough on its own.
//! 2. **Summary.** Otherwise the model is asked (a separate request through
//!    the same engine) to summarize everything before the recent window. The
//!    history it summarizes is sent in pieces that each fit the window, the
//!    summary of one piece leading the next. The new transcript is the last
//!    user messages, the summary and the recent items.
//!
//! Nothing is written until the new transcript is complete: the caller
//! appends one `ContextCompacted` event, so a compaction that fails or is
//! interrupted changes nothing. The log keeps the full history.
//!
//! The recent window never splits a tool call from its result, nor a
//! reasoning item from what follows it.

use std::borrow::Cow;

use futures::StreamExt;
use roder_api::events::{CompactionTrigger, ContextCompacted};
use roder_api::inference::{
    AgentInferenceRequest, InferenceEngine, InferenceEvent, InferenceTurnContext, TokenUsage,
};
use roder_api::transcript::TranscriptItem;

/// The summary request's instructions. Public so a scripted engine can tell
/// a summary request from a turn's.
pub const SUMMARY_INSTRUCTIONS: &str = "You are compacting the history of a coding agent's \
session so it can go on within its context window. Write a summary of the work so far for \
the agent that continues it: the user's goals and constraints, what was done (files changed, \
commands run, their results), decisions taken and why, what failed, and what remains to do. \
Keep names, paths, identifiers and error messages exact. Answer with the summary only; do not \
call tools.";

/// The request's last message, asking for the summary.
const SUMMARY_REQUEST: &str = "Summarize the conversation above as instructed. Do not call tools.";

/// How the summary is introduced to the model in later requests.
pub const SUMMARY_PREFIX: &str = "Summary of the session so far (earlier history was \
compacted; the thread's log keeps it whole):\n\n";

/// Share of the threshold kept as recent items, verbatim (in tokens: 1/4).
const RECENT_SHARE_DIVISOR: u64 = 4;
/// A compaction aims at 40% of the threshold, so it is not repeated every
/// step, and stubs of pruned outputs do not pile up: pruning alone that
/// leaves more is followed by a summary.
const TARGET_SHARE_PERCENT: u64 = 40;
/// User messages carried from before the recent window.
const CARRIED_USER_MESSAGES: usize = 3;
/// Largest carried user message, in bytes (head and tail kept).
const CARRIED_USER_MESSAGE_BYTES: usize = 2_048;
/// Tool outputs this short are left alone by pruning (a stub is not shorter).
const PRUNE_MIN_BYTES: usize = 256;

/// Estimated tokens of one request: its bytes / 4 (instructions, developer
/// context, transcript and tool specs).
pub(crate) fn estimate_tokens(request: &AgentInferenceRequest) -> u64 {
    estimate_with_tool_bytes(request, tool_bytes(&request.tools))
}

/// The bytes of `tools` as the model receives them (their schemas
/// serialised): measured once per turn, since every request of a turn
/// carries the same tools.
pub(crate) fn tool_bytes(tools: &[roder_api::tools::ToolSpec]) -> usize {
    tools
        .iter()
        .map(|tool| tool.name.len() + tool.description.len() + tool.parameters.to_string().len())
        .sum()
}

/// [`estimate_tokens`] of a request whose tools are `tools` bytes.
pub(crate) fn estimate_with_tool_bytes(request: &AgentInferenceRequest, tools: usize) -> u64 {
    let bytes = request.instructions.len()
        + request.developer_context.as_ref().map_or(0, String::len)
        + transcript_bytes(&request.transcript)
        + tools;
    (bytes / 4) as u64
}

fn transcript_bytes(items: &[TranscriptItem]) -> usize {
    items.iter().map(item_bytes).sum()
}

/// An item's size as the model sees it, roughly (its text plus a little
/// framing).
fn item_bytes(item: &TranscriptItem) -> usize {
    const FRAMING: usize = 16;
    FRAMING
        + match item {
            TranscriptItem::UserMessage { text, images } => {
                text.len() + images.iter().map(String::len).sum::<usize>()
            }
            TranscriptItem::AssistantMessage { text } => text.len(),
            TranscriptItem::Reasoning {
                text,
                provider_data,
            } => {
                text.len()
                    + provider_data
                        .as_ref()
                        .map_or(0, |data| data.to_string().len())
            }
            TranscriptItem::ToolCall {
                id,
                name,
                arguments,
            } => id.len() + name.len() + arguments.len(),
            TranscriptItem::ToolResult {
                id, name, output, ..
            } => id.len() + name.len() + output.len(),
        }
}

/// `text` cut to about `max_bytes`: its head and tail, with the cut stated
/// in between. Cuts fall on character boundaries.
pub(crate) fn cap_text(text: &str, max_bytes: usize) -> Cow<'_, str> {
    if text.len() <= max_bytes {
        return Cow::Borrowed(text);
    }
    let half = max_bytes / 2;
    let head_end = floor_boundary(text, half);
    let tail_start = ceil_boundary(text, text.len().saturating_sub(half));
    let head = text.get(..head_end).unwrap_or_default();
    let tail = text.get(tail_start..).unwrap_or_default();
    let cut = tail_start.saturating_sub(head_end);
    Cow::Owned(format!(
        "{head}\n[... {cut} bytes cut here to fit the context window; the thread's log keeps the whole text ...]\n{tail}"
    ))
}

fn floor_boundary(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_boundary(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
}

/// Caps every tool output of a request's transcript at `max_bytes` (the
/// log keeps them whole: this runs on the copy sent to the model).
pub(crate) fn cap_tool_outputs(transcript: &mut [TranscriptItem], max_bytes: usize) {
    for item in transcript {
        if let TranscriptItem::ToolResult { output, .. } = item
            && let Cow::Owned(capped) = cap_text(output, max_bytes)
        {
            *output = capped;
        }
    }
}

/// For each index `i` in `0..=len`: whether the transcript may be cut right
/// before item `i` (every call before it answered before it, and item `i`
/// does not continue a reasoning item before it).
fn safe_cuts(transcript: &[TranscriptItem]) -> Vec<bool> {
    let mut cuts = Vec::with_capacity(transcript.len() + 1);
    let mut open: Vec<&str> = Vec::new();
    let mut after_reasoning = false;
    for item in transcript {
        cuts.push(open.is_empty() && !after_reasoning);
        match item {
            TranscriptItem::ToolCall { id, .. } => open.push(id),
            TranscriptItem::ToolResult { id, .. } => open.retain(|call| call != id),
            _ => {}
        }
        after_reasoning = matches!(item, TranscriptItem::Reasoning { .. });
    }
    cuts.push(open.is_empty());
    cuts
}

/// The earliest safe cut whose items after it fit `budget_bytes`; at worst
/// the latest safe cut (possibly `len`: nothing recent kept verbatim).
fn recent_start(transcript: &[TranscriptItem], budget_bytes: usize) -> usize {
    let cuts = safe_cuts(transcript);
    let mut size = 0usize;
    let mut best = None;
    for index in (0..=transcript.len()).rev() {
        if index < transcript.len() {
            size += item_bytes(&transcript[index]);
        }
        if size > budget_bytes && best.is_some() {
            break;
        }
        if cuts[index] {
            best = Some(index);
        }
    }
    best.unwrap_or(transcript.len())
}

/// Replaces the outputs of tool results before `keep_from` with a stub;
/// returns how many were replaced.
fn prune(transcript: &mut [TranscriptItem], keep_from: usize) -> usize {
    let mut pruned = 0;
    for item in transcript.iter_mut().take(keep_from) {
        if let TranscriptItem::ToolResult { output, .. } = item
            && output.len() > PRUNE_MIN_BYTES
        {
            *output = format!(
                "[output of {} bytes removed to save context; the thread's log keeps it]",
                output.len()
            );
            pruned += 1;
        }
    }
    pruned
}

/// When a thread compacts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Estimated tokens past which a request compacts first.
    pub threshold: Option<u64>,
    /// The model's context window, when its engine reports it.
    pub window: Option<u64>,
}

/// Default threshold as a share of the model's context window: 80%.
const WINDOW_SHARE_PERCENT: u64 = 80;

impl Limits {
    /// `auto_compact_token_limit`, else 80% of the model's context window
    /// from its engine's `list_models` (one attempt, bounded by a few
    /// seconds; an answer is remembered for the engine's life, a failure is
    /// asked again next turn); neither: never auto-compact.
    pub async fn resolve(
        limit: Option<u64>,
        engine: &std::sync::Arc<dyn InferenceEngine>,
        model: &str,
        reliability: &roder_api::inference::ReliabilityConfig,
    ) -> Limits {
        let window = match windows::cached(engine, model) {
            Some(window) => window,
            None => {
                let listed = list_window(engine.as_ref(), model, reliability).await;
                if let Some(window) = listed {
                    windows::remember(engine, model, window);
                }
                listed.flatten()
            }
        };
        Limits {
            threshold: limit.or_else(|| window.map(|window| window / 100 * WINDOW_SHARE_PERCENT)),
            window,
        }
    }
}

/// The model's window from `list_models`: `Some(window)` when the engine
/// answered (a model without a window included), `None` when it failed.
async fn list_window(
    engine: &dyn InferenceEngine,
    model: &str,
    reliability: &roder_api::inference::ReliabilityConfig,
) -> Option<Option<u64>> {
    let once = roder_api::inference::ReliabilityConfig {
        max_attempts: 1,
        ..reliability.clone()
    };
    let context = roder_api::inference::InferenceProviderContext { reliability: &once };
    let listed = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        engine.list_models(context),
    )
    .await;
    match listed {
        Ok(Ok(models)) => Some(
            models
                .iter()
                .find(|descriptor| descriptor.id == model)
                .and_then(|descriptor| descriptor.context_window),
        ),
        Ok(Err(error)) => {
            tracing::debug!("could not list models for the context window: {error:#}");
            None
        }
        Err(_) => None,
    }
}

/// Context windows an engine listed, per engine instance and model, so a
/// remote engine is asked once per process, not once per turn. Keyed by the
/// engine's address and checked against a weak handle: a new engine at a
/// freed address is asked again.
mod windows {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock, Weak};

    use roder_api::inference::InferenceEngine;

    type Entry = (Weak<dyn InferenceEngine>, Option<u64>);

    fn table() -> std::sync::MutexGuard<'static, HashMap<(usize, String), Entry>> {
        static TABLE: OnceLock<Mutex<HashMap<(usize, String), Entry>>> = OnceLock::new();
        TABLE
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn key(engine: &Arc<dyn InferenceEngine>, model: &str) -> (usize, String) {
        (Arc::as_ptr(engine) as *const () as usize, model.to_string())
    }

    pub fn cached(engine: &Arc<dyn InferenceEngine>, model: &str) -> Option<Option<u64>> {
        let table = table();
        let (alive, window) = table.get(&key(engine, model))?;
        let same = alive
            .upgrade()
            .is_some_and(|alive| Arc::ptr_eq(&alive, engine));
        same.then_some(*window)
    }

    pub fn remember(engine: &Arc<dyn InferenceEngine>, model: &str, window: Option<u64>) {
        let mut table = table();
        table.retain(|_, (alive, _)| alive.strong_count() > 0);
        table.insert(key(engine, model), (Arc::downgrade(engine), window));
    }
}

/// What a compaction works from.
pub(crate) struct CompactionInput<'a> {
    pub engine: &'a dyn InferenceEngine,
    pub context: InferenceTurnContext<'a>,
    /// The request that would be sent next (its transcript capped).
    pub request: AgentInferenceRequest,
    /// Tokens the compacted request should stay well under.
    pub threshold: u64,
    /// Tokens one summary request may carry (the threshold in a turn; for a
    /// manual compaction, the threshold when one is known).
    pub request_budget: u64,
    pub trigger: CompactionTrigger,
    /// The seq of the thread's last event when the transcript was taken.
    pub last_seq: u64,
    pub turn_id: Option<String>,
}

/// A finished compaction: the event to append and the usage of its summary
/// requests.
pub(crate) struct Compaction {
    pub event: ContextCompacted,
    pub usage: TokenUsage,
}

/// Compacts `input.request.transcript`, or says why it could not. Writes
/// nothing.
pub(crate) async fn compact(input: CompactionInput<'_>) -> anyhow::Result<Compaction> {
    let span = crate::trace::step("compaction");
    let outcome = tracing::Instrument::instrument(compact_now(input), span.clone()).await;
    if let Err(error) = &outcome {
        crate::trace::failed(&span, &format!("{error:#}"));
    }
    outcome
}

async fn compact_now(input: CompactionInput<'_>) -> anyhow::Result<Compaction> {
    let tokens_before = estimate_tokens(&input.request);
    let target = input.threshold / 100 * TARGET_SHARE_PERCENT;
    let recent_bytes =
        usize::try_from(input.threshold / RECENT_SHARE_DIVISOR * 4).unwrap_or(usize::MAX);
    let mut transcript = input.request.transcript.clone();
    let keep_from = recent_start(&transcript, recent_bytes);
    let pruned = prune(&mut transcript, keep_from);
    let mut pruned_request = input.request.clone();
    pruned_request.transcript = transcript.clone();
    let pruned_tokens = estimate_tokens(&pruned_request);
    if pruned > 0 && pruned_tokens <= target {
        return Ok(Compaction {
            event: ContextCompacted {
                thread_id: input.context.thread_id.to_string(),
                turn_id: input.turn_id.clone(),
                summary: format!(
                    "{pruned} older tool outputs were removed from the context; the thread's log keeps them."
                ),
                transcript,
                replaced_through_seq: input.last_seq,
                replaced_items: pruned as u64,
                tokens_before,
                tokens_after: pruned_tokens,
                trigger: input.trigger,
                thread_usage: None,
            },
            usage: TokenUsage::default(),
        });
    }
    let (head, tail) = transcript.split_at(keep_from);
    if head.is_empty() {
        anyhow::bail!(
            "nothing to compact: the {} most recent items alone are about {tokens_before} tokens \
             (threshold {}); start a new thread or lower the tool output cap",
            tail.len(),
            input.threshold
        );
    }
    let mut usage = TokenUsage::default();
    let summary = summarize(&input, head, &mut usage).await?;
    let head_bytes = transcript_bytes(head);
    if summary.len() >= head_bytes {
        anyhow::bail!(
            "the model's summary ({} bytes) is not shorter than the history it replaces \
             ({head_bytes} bytes): no compaction",
            summary.len()
        );
    }
    let mut compacted = carried_user_messages(head);
    compacted.push(TranscriptItem::UserMessage {
        text: format!("{SUMMARY_PREFIX}{summary}"),
        images: Vec::new(),
    });
    compacted.extend(tail.iter().cloned());
    let mut after_request = input.request.clone();
    after_request.transcript = compacted.clone();
    let tokens_after = estimate_tokens(&after_request);
    if tokens_after >= tokens_before {
        anyhow::bail!(
            "compaction would not make the request smaller ({tokens_before} -> {tokens_after} \
             estimated tokens)"
        );
    }
    Ok(Compaction {
        event: ContextCompacted {
            thread_id: input.context.thread_id.to_string(),
            turn_id: input.turn_id.clone(),
            summary,
            transcript: compacted,
            replaced_through_seq: input.last_seq,
            replaced_items: head.len() as u64,
            tokens_before,
            tokens_after,
            trigger: input.trigger,
            // Stamped as it is appended (`LogCursor::stamp`).
            thread_usage: None,
        },
        usage,
    })
}

/// The last few user messages before the recent window, capped, in order.
fn carried_user_messages(head: &[TranscriptItem]) -> Vec<TranscriptItem> {
    let mut carried: Vec<TranscriptItem> = head
        .iter()
        .rev()
        .filter_map(|item| match item {
            TranscriptItem::UserMessage { text, .. } if !text.starts_with(SUMMARY_PREFIX) => {
                Some(TranscriptItem::UserMessage {
                    text: cap_text(text, CARRIED_USER_MESSAGE_BYTES).into_owned(),
                    images: Vec::new(),
                })
            }
            _ => None,
        })
        .take(CARRIED_USER_MESSAGES)
        .collect();
    carried.reverse();
    carried
}

/// The model's summary of `head`, asked in pieces that each fit the
/// threshold: the summary so far leads the next piece.
async fn summarize(
    input: &CompactionInput<'_>,
    head: &[TranscriptItem],
    usage: &mut TokenUsage,
) -> anyhow::Result<String> {
    let framing = AgentInferenceRequest {
        instructions: SUMMARY_INSTRUCTIONS.to_string(),
        developer_context: None,
        transcript: Vec::new(),
        ..input.request.clone()
    };
    let fixed_bytes = usize::try_from(estimate_tokens(&framing) * 4).unwrap_or(usize::MAX);
    let window_bytes =
        usize::try_from(input.request_budget.saturating_mul(4)).unwrap_or(usize::MAX);
    // Room for the history of one piece: the threshold less the framing, the
    // summary so far and the answer.
    let piece_bytes = window_bytes.saturating_sub(fixed_bytes) / 2;
    if piece_bytes < 1_024 {
        anyhow::bail!(
            "the instructions and tool specs alone (about {} tokens) leave no room under the \
             compaction threshold ({} tokens) to summarize the history; raise \
             auto_compact_token_limit",
            fixed_bytes / 4,
            input.request_budget
        );
    }
    let item_cap = piece_bytes / 2;
    let mut summary: Option<String> = None;
    for piece in pieces(head, piece_bytes) {
        let mut transcript = Vec::with_capacity(piece.len() + 2);
        if let Some(previous) = &summary {
            transcript.push(TranscriptItem::UserMessage {
                text: format!("{SUMMARY_PREFIX}{previous}"),
                images: Vec::new(),
            });
        }
        transcript.extend(piece.iter().map(|item| capped_item(item, item_cap)));
        transcript.push(TranscriptItem::UserMessage {
            text: SUMMARY_REQUEST.to_string(),
            images: Vec::new(),
        });
        let request = AgentInferenceRequest {
            transcript,
            ..framing.clone()
        };
        let text = request_text(input, request, usage).await?;
        if text.trim().is_empty() {
            anyhow::bail!("the model answered the summary request with no text: no compaction");
        }
        summary = Some(text);
    }
    summary.ok_or_else(|| anyhow::anyhow!("nothing to summarize"))
}

/// `head` split at safe cuts into pieces of about `max_bytes` each (a piece
/// holds at least one item; items are capped when sent).
fn pieces(head: &[TranscriptItem], max_bytes: usize) -> Vec<&[TranscriptItem]> {
    let cuts = safe_cuts(head);
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut size = 0;
    let mut last_cut = 0;
    for (index, item) in head.iter().enumerate() {
        if cuts[index] {
            last_cut = index;
        }
        size += item_bytes(item).min(max_bytes / 2);
        if size > max_bytes && last_cut > start {
            pieces.push(&head[start..last_cut]);
            start = last_cut;
            size = head[start..=index]
                .iter()
                .map(|item| item_bytes(item).min(max_bytes / 2))
                .sum();
        }
    }
    if start < head.len() {
        pieces.push(&head[start..]);
    }
    pieces
}

/// An item with its text capped, for a summary request.
fn capped_item(item: &TranscriptItem, max_bytes: usize) -> TranscriptItem {
    let cap = |text: &String| cap_text(text, max_bytes).into_owned();
    match item {
        TranscriptItem::UserMessage { text, .. } => TranscriptItem::UserMessage {
            text: cap(text),
            images: Vec::new(),
        },
        TranscriptItem::AssistantMessage { text } => {
            TranscriptItem::AssistantMessage { text: cap(text) }
        }
        TranscriptItem::ToolResult {
            id,
            name,
            output,
            is_error,
        } => TranscriptItem::ToolResult {
            id: id.clone(),
            name: name.clone(),
            output: cap(output),
            is_error: *is_error,
        },
        TranscriptItem::ToolCall {
            id,
            name,
            arguments,
        } if arguments.len() > max_bytes => TranscriptItem::ToolCall {
            id: id.clone(),
            name: name.clone(),
            // Cut arguments are no longer JSON; say what they were.
            arguments:
                serde_json::json!({ "omitted": format!("{} bytes of arguments", arguments.len()) })
                    .to_string(),
        },
        other => other.clone(),
    }
}

/// Streams one summary request and returns its text (tool calls ignored).
/// Stops at once when the turn is cancelled.
async fn request_text(
    input: &CompactionInput<'_>,
    request: AgentInferenceRequest,
    usage: &mut TokenUsage,
) -> anyhow::Result<String> {
    let cancellation = input.context.cancellation;
    let work = async {
        let mut stream = input.engine.stream_turn(input.context, request).await?;
        let mut text = String::new();
        let mut request_usage = TokenUsage::default();
        while let Some(event) = stream.next().await {
            match event? {
                InferenceEvent::MessageDelta(delta) => text.push_str(&delta.text),
                InferenceEvent::Usage(reported) => request_usage.add(&reported),
                InferenceEvent::Completed(_) => return Ok((text, request_usage)),
                InferenceEvent::Failed(failure) => {
                    anyhow::bail!("the summary request failed: {}", failure.message)
                }
                _ => {}
            }
        }
        anyhow::bail!("the summary request's stream ended before it completed")
    };
    let (text, request_usage) = tokio::select! {
        biased;
        _ = cancellation.cancelled() => anyhow::bail!("the compaction was cancelled"),
        result = work => result?,
    };
    usage.add(&request_usage);
    Ok(text)
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
