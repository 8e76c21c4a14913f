//! Walks a thread's persisted log, in `seq` order, into ATIF steps.
//!
//! The mapping (why each choice is made is said where it is made):
//! * a user message is a `user` step;
//! * each model request (`inference_started`) opens an `agent` step with
//!   `llm_call_count = 1`; the request's reasoning, messages, tool calls and
//!   usage fill it, and the results of its calls are its observation (ATIF
//!   wants a result in the step of its call);
//! * a turn's final answer, carried by `turn_completed` rather than a
//!   transcript item, is the message of the turn's last agent step;
//! * a compaction, an interrupted, failed or timed-out turn, a rollback and a
//!   fork are `system` steps, each with `extra.event` naming what happened;
//! * a fork's copied conversation comes first, marked `is_copied_context`.

use std::collections::HashMap;

use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::inference::TokenUsage;
use roder_api::transcript::TranscriptItem;
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use crate::model::{
    Agent, FinalMetrics, Metrics, Observation, ObservationResult, SCHEMA_VERSION, Source, Step,
    ToolCall, Trajectory,
};

/// Who wrote the trajectory: the agent's name and version (the `roder`
/// binary passes its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    pub name: String,
    pub version: String,
}

/// A thread that cannot be a trajectory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExportError {
    /// ATIF needs at least one step; the thread has had no turn.
    NoSteps { thread_id: String },
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportError::NoSteps { thread_id } => write!(
                f,
                "thread \"{thread_id}\" has no turn yet, and an ATIF trajectory needs at least one step"
            ),
        }
    }
}

impl std::error::Error for ExportError {}

/// The ATIF trajectory of a thread, from its persisted events (in `seq`
/// order, as `ThreadStore::load_thread` returns them).
///
/// ```
/// use roder_api::events::{EventEnvelope, RoderEvent, TurnCompleted, TurnStarted, InferenceStarted};
/// use roder_atif::{AgentInfo, trajectory};
///
/// let event = |seq, event| EventEnvelope {
///     seq,
///     timestamp: time::OffsetDateTime::UNIX_EPOCH,
///     thread_id: "t".into(),
///     turn_id: Some("u".into()),
///     event,
/// };
/// let events = vec![
///     event(1, RoderEvent::TurnStarted(TurnStarted {
///         thread_id: "t".into(), turn_id: "u".into(), message: "hi".into(),
///         provider: "openai".into(), model: "gpt-5".into(),
///     })),
///     event(2, RoderEvent::InferenceStarted(InferenceStarted {
///         thread_id: "t".into(), turn_id: "u".into(), round: 1,
///     })),
///     event(3, RoderEvent::TurnCompleted(TurnCompleted {
///         thread_id: "t".into(), turn_id: "u".into(), final_message: Some("hello".into()),
///         usage: Default::default(), thread_usage: Default::default(),
///         stop_reason: None, incomplete: None,
///     })),
/// ];
/// let agent = AgentInfo { name: "roder".into(), version: "0.1.0".into() };
/// let trajectory = trajectory("t", &events, agent).unwrap();
/// assert_eq!(trajectory.steps.len(), 1);
/// assert_eq!(trajectory.steps[0].message, "hello");
/// assert_eq!(trajectory.agent.model_name.as_deref(), Some("openai/gpt-5"));
/// ```
pub fn trajectory(
    thread_id: &str,
    events: &[EventEnvelope],
    agent: AgentInfo,
) -> Result<Trajectory, ExportError> {
    let mut builder = Builder::default();
    for envelope in events {
        builder.event(envelope);
    }
    builder.finish(thread_id, agent)
}

/// How one turn ended, for `extra.turns` and `notes`.
#[derive(Debug, Clone)]
struct TurnRecord {
    turn_id: String,
    model: String,
    outcome: Value,
}

#[derive(Default)]
struct Builder {
    steps: Vec<Step>,
    /// Index in `steps` of the agent step that takes the current request's
    /// items; `None` between requests.
    open: Option<usize>,
    /// The step holding each tool call, by call id.
    calls: HashMap<String, usize>,
    /// Results already placed, by call id: (step, index in its results).
    results: HashMap<String, (usize, usize)>,
    /// Completions (`tool_call_completed`) whose transcript result has not
    /// come yet.
    completions: HashMap<String, Completion>,
    /// The last request's usage, held one event: followed by a compaction,
    /// it is the summary request's (a system step cannot carry metrics).
    pending_usage: Option<TokenUsage>,
    totals: TokenUsage,
    model: Option<String>,
    first_model: Option<String>,
    workspace: Option<String>,
    turns: Vec<TurnRecord>,
    /// Set while a fork's copied conversation is being added.
    copying: bool,
}

#[derive(Debug, Clone)]
struct Completion {
    tool_name: Option<String>,
    output: Option<String>,
    is_error: bool,
    duration_ms: u64,
}

fn timestamp(at: OffsetDateTime) -> Option<String> {
    at.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

impl Builder {
    fn event(&mut self, envelope: &EventEnvelope) {
        let at = envelope.timestamp;
        if let RoderEvent::UsageUpdated(updated) = &envelope.event {
            self.flush_usage();
            self.pending_usage = Some(updated.usage.clone());
            return;
        }
        if !matches!(envelope.event, RoderEvent::ContextCompacted(_)) {
            self.flush_usage();
        }
        match &envelope.event {
            RoderEvent::ThreadCreated(created) => self.workspace = Some(created.workspace.clone()),
            RoderEvent::TurnStarted(started) => {
                self.close();
                let model = format!("{}/{}", started.provider, started.model);
                self.first_model.get_or_insert_with(|| model.clone());
                self.model = Some(model.clone());
                self.turns.push(TurnRecord {
                    turn_id: started.turn_id.clone(),
                    model,
                    outcome: json!({"status": "unfinished"}),
                });
            }
            RoderEvent::InferenceStarted(started) => {
                self.close();
                let mut step = self.agent_step(at);
                step.llm_call_count = Some(1);
                step.extra = Some(object(
                    json!({"turn_id": started.turn_id, "round": started.round}),
                ));
                self.open = Some(self.steps.len());
                self.steps.push(step);
            }
            RoderEvent::TranscriptItemAppended(appended) => self.item(&appended.item, at),
            RoderEvent::ToolCallCompleted(completed) => {
                let completion = Completion {
                    tool_name: completed.tool_name.clone(),
                    output: completed.output.clone(),
                    is_error: completed.is_error,
                    duration_ms: completed.duration_ms,
                };
                match self.results.get(&completed.call_id) {
                    Some(&(step, index)) => self.annotate_result(step, index, &completion),
                    None => {
                        self.completions
                            .insert(completed.call_id.clone(), completion);
                    }
                }
            }
            RoderEvent::ContextCompacted(compacted) => {
                let mut extra = object(json!({
                    "event": "context_compacted",
                    "trigger": compacted.trigger,
                    "replaced_items": compacted.replaced_items,
                    "replaced_through_seq": compacted.replaced_through_seq,
                    "tokens_before": compacted.tokens_before,
                    "tokens_after": compacted.tokens_after,
                    "turn_id": compacted.turn_id,
                }));
                if let Some(usage) = self.pending_usage.take() {
                    self.totals.add(&usage);
                    extra.insert("summary_usage".into(), json!(usage));
                }
                self.system_step(at, compacted.summary.clone(), extra);
            }
            RoderEvent::TurnCompleted(completed) => {
                if let Some(answer) = completed
                    .final_message
                    .as_ref()
                    .filter(|text| !text.is_empty())
                {
                    let index = self.ensure_open(at);
                    let message = &mut self.steps[index].message;
                    if message.is_empty() {
                        message.clone_from(answer);
                    } else if !message.ends_with(answer.as_str()) {
                        message.push_str("\n\n");
                        message.push_str(answer);
                    }
                }
                self.close();
                self.end_turn(
                    &completed.turn_id,
                    json!({
                        "status": "completed",
                        "stop_reason": completed.stop_reason,
                        "incomplete": completed.incomplete,
                        "usage": completed.usage,
                    }),
                );
            }
            RoderEvent::TurnFailed(failed) => {
                self.close();
                self.system_step(
                    at,
                    format!("The turn failed: {}", failed.error),
                    object(json!({"event": "turn_failed", "turn_id": failed.turn_id})),
                );
                self.end_turn(
                    &failed.turn_id,
                    json!({"status": "failed", "error": failed.error}),
                );
            }
            RoderEvent::TurnInterrupted(interrupted) => {
                self.close();
                self.system_step(
                    at,
                    "The turn was interrupted; calls still running were stopped.".to_string(),
                    object(json!({"event": "turn_interrupted", "turn_id": interrupted.turn_id})),
                );
                self.end_turn(&interrupted.turn_id, json!({"status": "interrupted"}));
            }
            RoderEvent::TurnDeadlineExceeded(exceeded) => {
                self.close();
                self.system_step(
                    at,
                    format!(
                        "The turn's deadline of {} s passed; calls still running were stopped.",
                        exceeded.deadline_seconds
                    ),
                    object(json!({
                        "event": "turn_deadline_exceeded",
                        "turn_id": exceeded.turn_id,
                        "deadline_seconds": exceeded.deadline_seconds,
                    })),
                );
                self.end_turn(
                    &exceeded.turn_id,
                    json!({"status": "deadline_exceeded", "deadline_seconds": exceeded.deadline_seconds}),
                );
            }
            RoderEvent::ThreadRolledBack(rolled_back) => {
                self.close();
                self.system_step(
                    at,
                    format!(
                        "Rolled back to the end of turn {}: the turns after it were undone.",
                        rolled_back.to_turn
                    ),
                    object(json!({
                        "event": "thread_rolled_back",
                        "to_turn": rolled_back.to_turn,
                        "rolled_back_turns": rolled_back.rolled_back_turns,
                    })),
                );
            }
            RoderEvent::ThreadForked(forked) => {
                self.close();
                self.copying = true;
                for item in &forked.transcript {
                    self.item(item, at);
                }
                self.close();
                self.copying = false;
                self.system_step(
                    at,
                    format!(
                        "Forked from thread {} at the end of its turn {}.",
                        forked.source_thread_id, forked.at_turn
                    ),
                    object(json!({
                        "event": "thread_forked",
                        "source_thread_id": forked.source_thread_id,
                        "at_turn": forked.at_turn,
                    })),
                );
            }
            _ => {}
        }
    }

    fn item(&mut self, item: &TranscriptItem, at: OffsetDateTime) {
        match item {
            TranscriptItem::UserMessage { text, images } => {
                self.close();
                let mut step = self.bare_step(at, Source::User, text.clone());
                if !images.is_empty() {
                    step.extra = Some(object(json!({"images": images.len()})));
                }
                self.steps.push(step);
            }
            TranscriptItem::AssistantMessage { text } => {
                let index = self.ensure_open(at);
                let message = &mut self.steps[index].message;
                if !message.is_empty() {
                    message.push_str("\n\n");
                }
                message.push_str(text);
            }
            TranscriptItem::Reasoning { text, .. } => {
                if text.is_empty() {
                    return;
                }
                let index = self.ensure_open(at);
                let reasoning = self.steps[index]
                    .reasoning_content
                    .get_or_insert_with(String::new);
                if !reasoning.is_empty() {
                    reasoning.push_str("\n\n");
                }
                reasoning.push_str(text);
            }
            TranscriptItem::ToolCall {
                id,
                name,
                arguments,
            } => {
                let index = self.ensure_open(at);
                let parsed = match serde_json::from_str::<Value>(arguments) {
                    Ok(Value::Object(map)) => map,
                    _ => object(json!({"raw": arguments})),
                };
                self.steps[index]
                    .tool_calls
                    .get_or_insert_with(Vec::new)
                    .push(ToolCall {
                        tool_call_id: id.clone(),
                        function_name: name.clone(),
                        arguments: parsed,
                        extra: None,
                    });
                self.calls.insert(id.clone(), index);
            }
            TranscriptItem::ToolResult {
                id,
                name,
                output,
                is_error,
            } => self.result(id, name, output.clone(), *is_error, at),
        }
    }

    /// Places a call's result in the step of its call; a result whose call
    /// is not in the log becomes a system step (ATIF refuses a result that
    /// names a call of another step).
    fn result(&mut self, id: &str, name: &str, output: String, is_error: bool, at: OffsetDateTime) {
        let Some(&index) = self.calls.get(id) else {
            let mut step = self.bare_step(
                at,
                Source::System,
                format!("Result of tool call {id} ({name}), whose call is not in the log."),
            );
            step.observation = Some(Observation {
                results: vec![ObservationResult {
                    source_call_id: None,
                    content: output,
                    extra: Some(object(json!({"call_id": id, "is_error": is_error}))),
                }],
            });
            self.close();
            self.steps.push(step);
            return;
        };
        if self.results.contains_key(id) {
            return; // one result per call; a repeat (an old log) adds nothing
        }
        let results = &mut self.steps[index]
            .observation
            .get_or_insert_with(|| Observation {
                results: Vec::new(),
            })
            .results;
        results.push(ObservationResult {
            source_call_id: Some(id.to_string()),
            content: output,
            extra: Some(object(json!({"is_error": is_error}))),
        });
        let position = results.len() - 1;
        self.results.insert(id.to_string(), (index, position));
        if let Some(completion) = self.completions.remove(id) {
            self.annotate_result(index, position, &completion);
        }
    }

    fn annotate_result(&mut self, step: usize, index: usize, completion: &Completion) {
        if let Some(result) = self.steps[step]
            .observation
            .as_mut()
            .and_then(|observation| observation.results.get_mut(index))
        {
            let extra = result.extra.get_or_insert_with(Map::new);
            extra.insert("duration_ms".into(), json!(completion.duration_ms));
        }
    }

    fn agent_step(&self, at: OffsetDateTime) -> Step {
        let mut step = self.bare_step(at, Source::Agent, String::new());
        step.model_name.clone_from(&self.model);
        step
    }

    fn bare_step(&self, at: OffsetDateTime, source: Source, message: String) -> Step {
        Step {
            step_id: 0,
            timestamp: timestamp(at),
            source,
            model_name: None,
            message,
            reasoning_content: None,
            tool_calls: None,
            observation: None,
            metrics: None,
            is_copied_context: self.copying.then_some(true),
            llm_call_count: None,
            extra: None,
        }
    }

    /// The open agent step, opened without a request when none is (a fork's
    /// copied items, a final answer after no request).
    fn ensure_open(&mut self, at: OffsetDateTime) -> usize {
        match self.open {
            Some(index) => index,
            None => {
                let step = self.agent_step(at);
                self.steps.push(step);
                let index = self.steps.len() - 1;
                self.open = Some(index);
                index
            }
        }
    }

    fn close(&mut self) {
        self.open = None;
    }

    /// A system step. A compaction inside a turn comes after the request's
    /// `inference_started` but before anything of its answer: it then goes
    /// before that still-empty agent step, where it happened.
    fn system_step(&mut self, at: OffsetDateTime, message: String, extra: Map<String, Value>) {
        let mut step = self.bare_step(at, Source::System, message);
        step.extra = Some(extra);
        match self.open {
            Some(index) if is_empty_agent_step(&self.steps[index]) => {
                self.steps.insert(index, step);
                self.open = Some(index + 1);
            }
            _ => {
                self.close();
                self.steps.push(step);
            }
        }
    }

    /// The held usage goes to the open step (one request's metrics) and
    /// into the totals.
    fn flush_usage(&mut self) {
        let Some(usage) = self.pending_usage.take() else {
            return;
        };
        self.totals.add(&usage);
        let Some(index) = self.open else {
            return;
        };
        let step = &mut self.steps[index];
        let mut total = usage.clone();
        if let Some(metrics) = &step.metrics {
            total.input_tokens += metrics.prompt_tokens;
            total.output_tokens += metrics.completion_tokens;
            total.cached_input_tokens += metrics.cached_tokens;
            total.reasoning_tokens += reasoning_tokens(metrics);
        }
        step.metrics = Some(Metrics {
            prompt_tokens: total.input_tokens,
            completion_tokens: total.output_tokens,
            cached_tokens: total.cached_input_tokens,
            extra: (total.reasoning_tokens > 0)
                .then(|| object(json!({"reasoning_tokens": total.reasoning_tokens}))),
        });
    }

    fn end_turn(&mut self, turn_id: &str, outcome: Value) {
        if let Some(turn) = self
            .turns
            .iter_mut()
            .rev()
            .find(|turn| turn.turn_id == turn_id)
        {
            turn.outcome = outcome;
        }
    }

    fn finish(mut self, thread_id: &str, agent: AgentInfo) -> Result<Trajectory, ExportError> {
        self.flush_usage();
        self.close();
        // A call whose transcript result never came (the process died
        // between the two) still has its completion's output.
        let mut unanswered: Vec<(String, Completion)> = self.completions.drain().collect();
        unanswered.sort_by(|a, b| a.0.cmp(&b.0));
        for (id, completion) in unanswered {
            if self.calls.contains_key(&id)
                && let Some(output) = completion.output.clone()
            {
                let name = completion.tool_name.clone().unwrap_or_default();
                let at = OffsetDateTime::UNIX_EPOCH;
                self.completions.insert(id.clone(), completion.clone());
                self.result(&id, &name, output, completion.is_error, at);
            }
        }
        if self.steps.is_empty() {
            return Err(ExportError::NoSteps {
                thread_id: thread_id.to_string(),
            });
        }
        for (index, step) in self.steps.iter_mut().enumerate() {
            step.step_id = index + 1;
        }
        let notes: Vec<String> = self
            .turns
            .iter()
            .filter(|turn| turn.outcome["status"] != "completed")
            .map(|turn| {
                let status = turn.outcome["status"].as_str().unwrap_or("unfinished");
                format!("turn {} ended: {status}", turn.turn_id)
            })
            .collect();
        let turns: Vec<Value> = self
            .turns
            .iter()
            .map(|turn| json!({"turn_id": turn.turn_id, "model": turn.model, "outcome": turn.outcome}))
            .collect();
        let total_steps = self.steps.len();
        Ok(Trajectory {
            schema_version: SCHEMA_VERSION,
            session_id: thread_id.to_string(),
            agent: Agent {
                name: agent.name,
                version: agent.version,
                model_name: self.first_model,
            },
            steps: self.steps,
            notes: (!notes.is_empty()).then(|| notes.join("; ")),
            final_metrics: FinalMetrics {
                total_prompt_tokens: self.totals.input_tokens,
                total_completion_tokens: self.totals.output_tokens,
                total_cached_tokens: self.totals.cached_input_tokens,
                total_steps,
                extra: (self.totals.reasoning_tokens > 0).then(|| {
                    object(json!({"total_reasoning_tokens": self.totals.reasoning_tokens}))
                }),
            },
            extra: Some(object(json!({
                "workspace": self.workspace,
                "turns": turns,
            }))),
        })
    }
}

fn reasoning_tokens(metrics: &Metrics) -> u64 {
    metrics
        .extra
        .as_ref()
        .and_then(|extra| extra.get("reasoning_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn is_empty_agent_step(step: &Step) -> bool {
    step.source == Source::Agent
        && step.message.is_empty()
        && step.reasoning_content.is_none()
        && step.tool_calls.is_none()
        && step.metrics.is_none()
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
