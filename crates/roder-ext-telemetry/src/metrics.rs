//! Metrics, from the runtime's events rather than from more spans: turn
//! duration, tool call duration by tool, tokens by model, turns running,
//! sandboxes by state.

use std::collections::HashMap;

use opentelemetry::KeyValue;
use opentelemetry::metrics::Meter;
use roder_api::events::{EventEnvelope, RoderEvent, RunnerLifecycleAction};
use tokio::sync::broadcast;

/// Records metrics from `events` until the bus closes (run it on its own
/// task).
pub async fn record_events(meter: Meter, mut events: broadcast::Receiver<EventEnvelope>) {
    let turn_duration = meter
        .f64_histogram("roder.turn.duration")
        .with_unit("s")
        .with_description("Wall time of a turn, by how it ended")
        .build();
    let tool_duration = meter
        .f64_histogram("roder.tool.duration")
        .with_unit("s")
        .with_description("Wall time of a tool call, by tool")
        .build();
    let tokens = meter
        .u64_counter("gen_ai.client.token.usage")
        .with_unit("{token}")
        .with_description("Tokens used, by model and type")
        .build();
    let running = meter
        .i64_up_down_counter("roder.turns.running")
        .with_description("Turns running in this process")
        .build();
    let sandboxes = meter
        .i64_up_down_counter("roder.sandboxes")
        .with_description("Sandboxes this process holds, by state")
        .build();
    // When each running turn started, and its model.
    let mut started: HashMap<String, (time::OffsetDateTime, String)> = HashMap::new();
    loop {
        let envelope = match events.recv().await {
            Ok(envelope) => envelope,
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        match &envelope.event {
            RoderEvent::TurnStarted(turn) => {
                started.insert(
                    turn.turn_id.clone(),
                    (envelope.timestamp, turn.model.clone()),
                );
                running.add(1, &[]);
            }
            RoderEvent::ToolCallCompleted(call) => tool_duration.record(
                call.duration_ms as f64 / 1000.0,
                &[KeyValue::new(
                    "gen_ai.tool.name",
                    call.tool_name.clone().unwrap_or_default(),
                )],
            ),
            RoderEvent::UsageUpdated(usage) => {
                let model = envelope
                    .turn_id
                    .as_ref()
                    .and_then(|turn| started.get(turn))
                    .map(|(_, model)| model.clone())
                    .unwrap_or_default();
                for (kind, count) in [
                    ("input", usage.usage.input_tokens),
                    ("output", usage.usage.output_tokens),
                ] {
                    tokens.add(
                        count,
                        &[
                            KeyValue::new("gen_ai.request.model", model.clone()),
                            KeyValue::new("gen_ai.token.type", kind),
                        ],
                    );
                }
            }
            RoderEvent::RunnerLifecycle(lifecycle) => {
                let (state, change) = match lifecycle.action {
                    RunnerLifecycleAction::Created | RunnerLifecycleAction::Rejoined => ("live", 1),
                    RunnerLifecycleAction::Detached => ("live", -1),
                    RunnerLifecycleAction::Paused | RunnerLifecycleAction::Stopped => ("idle", 1),
                    RunnerLifecycleAction::Resumed | RunnerLifecycleAction::Woken => ("idle", -1),
                    _ => continue,
                };
                sandboxes.add(change, &[KeyValue::new("state", state)]);
            }
            event if event.is_terminal() => {
                let outcome = match event {
                    RoderEvent::TurnCompleted(_) => "completed",
                    RoderEvent::TurnFailed(_) => "failed",
                    RoderEvent::TurnInterrupted(_) => "interrupted",
                    _ => "deadline_exceeded",
                };
                if let Some((at, model)) = envelope
                    .turn_id
                    .as_ref()
                    .and_then(|turn| started.remove(turn))
                {
                    turn_duration.record(
                        (envelope.timestamp - at).as_seconds_f64(),
                        &[
                            KeyValue::new("roder.turn.outcome", outcome),
                            KeyValue::new("gen_ai.request.model", model),
                        ],
                    );
                    running.add(-1, &[]);
                }
            }
            _ => {}
        }
    }
}
