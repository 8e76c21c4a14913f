//! A turn's task: runs the rounds, enforces interrupt and deadline, and emits
//! exactly one terminal event.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use roder_api::events::{
    RoderEvent, ToolCallCompleted, TurnCompleted, TurnDeadlineExceeded, TurnFailed, TurnInterrupted,
};
use roder_api::transcript::TranscriptItem;

use roder_api::inference::TokenUsage;

use crate::runner::state::update_metadata;
use crate::runtime::Runtime;
use crate::turn::context::TurnContext;
use crate::turn::plan::TurnPlan;
use crate::turn::record::{CallState, OpenCalls};
use crate::turn::round::{self, TurnSuccess};
use crate::turn::tool_call::panic_message;

/// How long a stopped turn's work may take to wind down (tools kill their
/// processes, engines drop connections) before it is dropped outright.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

enum Ending {
    Completed(TurnSuccess),
    Failed(String),
    Interrupted,
    DeadlineExceeded,
}

impl Ending {
    fn open_call_note(&self) -> &'static str {
        match self {
            Ending::Interrupted => "the turn was interrupted before this tool call finished",
            Ending::DeadlineExceeded => "the turn's deadline passed before this tool call finished",
            _ => "the turn ended before this tool call finished",
        }
    }
}

/// How a turn ends whose body returned `result`.
fn body_ending(result: anyhow::Result<TurnSuccess>, plan: &TurnPlan) -> Ending {
    match result {
        Ok(success) => Ending::Completed(success),
        // Cancelled from another thread while the body was being polled: the
        // work saw it first and stopped with an error, but the turn was
        // interrupted (or ran out of time).
        Err(_) if plan.active.cancellation.is_cancelled() => {
            if plan.deadline.remaining().is_some_and(|left| left.is_zero()) {
                Ending::DeadlineExceeded
            } else {
                Ending::Interrupted
            }
        }
        Err(error) => Ending::Failed(format!("{error:#}")),
    }
}

pub(crate) async fn drive(runtime: Arc<Runtime>, plan: TurnPlan) {
    let open_calls = OpenCalls::default();
    let ctx = TurnContext::new(&runtime, &plan);
    let ending = {
        // A panic anywhere in the loop ends the turn as failed instead of
        // leaving the thread claimed by a task that no longer exists.
        let body = AssertUnwindSafe(round::run_rounds(ctx, &open_calls))
            .catch_unwind()
            .map(|outcome| match outcome {
                Ok(result) => result,
                Err(panic) => Err(anyhow::anyhow!(
                    "internal error: the turn panicked ({}); the thread accepts the next turn",
                    panic_message(panic.as_ref())
                )),
            });
        tokio::pin!(body);
        let deadline = async {
            match plan.deadline.instant() {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        // Whether the body is still unfinished, so it is polled again only
        // then: a finished future must never be polled twice.
        let mut unfinished = true;
        let ending = tokio::select! {
            biased;
            _ = plan.active.cancellation.cancelled() => Ending::Interrupted,
            _ = deadline => Ending::DeadlineExceeded,
            result = &mut body => {
                unfinished = false;
                body_ending(result, &plan)
            }
        };
        if unfinished {
            // Let the work see the cancellation and clean up, then drop it.
            plan.active.cancellation.cancel();
            let _ = tokio::time::timeout(CANCEL_GRACE, &mut body).await;
        }
        ending
    };
    close_open_calls(ctx, &open_calls, ending.open_call_note()).await;
    // Deferred events go before the terminal one.
    if let Err(error) = ctx.flush().await {
        tracing::warn!("could not record the turn's last events: {error:#}");
    }
    finish(&runtime, &plan, ending).await;
}

/// Answers every call the turn left unanswered: a call that finished keeps
/// its real result (its completion is already in the log); one still running
/// gets `note` and its one completion event.
async fn close_open_calls(ctx: TurnContext<'_>, open_calls: &OpenCalls, note: &str) {
    for call in open_calls.take() {
        let (output, is_error) = match call.state {
            CallState::Finished(result) => (result.text, result.is_error),
            CallState::Running => {
                let completed = ctx
                    .emit(RoderEvent::ToolCallCompleted(ToolCallCompleted {
                        thread_id: ctx.thread_id(),
                        turn_id: ctx.turn_id(),
                        call_id: call.call_id.clone(),
                        tool_name: Some(call.tool_name.clone()),
                        output: Some(note.to_string()),
                        is_error: true,
                        data: serde_json::Value::Null,
                        duration_ms: 0,
                    }))
                    .await;
                if let Err(error) = completed {
                    tracing::warn!("could not record an unfinished tool call: {error:#}");
                }
                (note.to_string(), true)
            }
        };
        let appended = ctx
            .append(TranscriptItem::ToolResult {
                id: call.call_id,
                name: call.tool_name,
                output,
                is_error,
            })
            .await;
        if let Err(error) = appended {
            tracing::warn!("could not record an unfinished tool call: {error:#}");
        }
    }
}

/// Frees the thread and writes the terminal event under the log lock, so a
/// turn started right after cannot number its events before this one.
async fn finish(runtime: &Runtime, plan: &TurnPlan, ending: Ending) {
    let thread_id = plan.thread_id().to_string();
    let turn_id = plan.turn_id.clone();
    let turn_usage = plan.usage();
    if turn_usage != TokenUsage::default() {
        // The thread's total in its metadata, for clients that list threads.
        let persisted = update_metadata(runtime.store.as_ref(), &plan.thread, |metadata| {
            metadata.usage.add(&turn_usage);
        })
        .await;
        if let Err(error) = persisted {
            tracing::warn!("could not record the thread's token usage: {error:#}");
        }
    }
    let span = tracing::Span::current();
    let outcome = match &ending {
        Ending::Completed(_) => "completed",
        Ending::Failed(error) => {
            crate::trace::failed(&span, error);
            "failed"
        }
        Ending::Interrupted => "interrupted",
        Ending::DeadlineExceeded => {
            crate::trace::failed(&span, "the turn's deadline passed");
            "deadline_exceeded"
        }
    };
    span.record("roder.turn.outcome", outcome);
    let event = match ending {
        Ending::Completed(success) => RoderEvent::TurnCompleted(TurnCompleted {
            thread_id,
            turn_id,
            final_message: success.final_message,
            usage: success.usage,
            // Every UsageUpdated of this turn is in the log already.
            thread_usage: plan.thread.log.lock().await.usage.clone(),
            stop_reason: success.stop_reason,
            incomplete: success.incomplete,
        }),
        Ending::Failed(error) => RoderEvent::TurnFailed(TurnFailed {
            thread_id,
            turn_id,
            error,
        }),
        Ending::Interrupted => RoderEvent::TurnInterrupted(TurnInterrupted { thread_id, turn_id }),
        Ending::DeadlineExceeded => RoderEvent::TurnDeadlineExceeded(TurnDeadlineExceeded {
            thread_id,
            turn_id,
            deadline_seconds: plan.deadline_seconds.unwrap_or_default(),
        }),
    };
    {
        let mut cursor = plan.thread.log.lock().await;
        plan.thread.release(&plan.turn_id);
        let ended = match &event {
            RoderEvent::TurnFailed(failed) => failed.error.clone(),
            RoderEvent::TurnCompleted(_) => "the turn completed".to_string(),
            RoderEvent::TurnInterrupted(_) => "the turn was interrupted".to_string(),
            _ => "the turn's deadline passed".to_string(),
        };
        if let Err(error) = runtime
            .bus
            .emit_locked(&mut cursor, plan.thread_id(), Some(&plan.turn_id), event)
            .await
        {
            tracing::warn!(
                "could not record the end of turn {}: {error:#}",
                plan.turn_id
            );
            // Whoever waits for the turn (`roder exec`, a client) must
            // still learn that it ended, or it waits for ever: the end is
            // broadcast unrecorded, as the failure the log will show once
            // the next writer closes the turn.
            let error = if ended.contains(&format!("{error:#}")) {
                ended
            } else {
                format!("{ended}; and its end could not be written to the log: {error:#}")
            };
            runtime.bus.broadcast_unrecorded(
                &cursor,
                plan.thread_id(),
                Some(&plan.turn_id),
                RoderEvent::TurnFailed(TurnFailed {
                    thread_id: plan.thread_id().to_string(),
                    turn_id: plan.turn_id.clone(),
                    error,
                }),
            );
        }
        if let Some(writer) = plan.take_writer() {
            writer.release_locked(&mut cursor);
        }
    }
    plan.active.done.store(true, Ordering::SeqCst);
    plan.active.finished.notify_waiters();
}
