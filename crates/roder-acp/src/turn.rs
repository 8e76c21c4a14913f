//! `session/prompt`: one Roder turn. Its events stream to the client as
//! `session/update`s; each ask becomes a `session/request_permission`
//! (answered in its own task, so the turn's other events keep flowing);
//! the prompt answers with the stop reason once the turn has ended, after
//! every update of the turn.

use std::sync::Arc;

use agent_client_protocol_schema::v1 as acp;
use roder_api::events::{EventEnvelope, IncompleteAnswer, RoderEvent};
use roder_core::{StartTurnRequest, TurnOptions};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use crate::agent::{Agent, Answer, internal, invalid_params, to_value};
use crate::input::turn_input;
use crate::permission;
use crate::session::Session;
use crate::updates::{Source, Translator};

impl Agent {
    pub(crate) async fn prompt(self: &Arc<Self>, request: acp::PromptRequest) -> Answer {
        let session = self.session(request.session_id.0.as_ref())?;
        let _one_at_a_time = session.prompting.try_lock().map_err(|_| {
            acp::Error::invalid_request().data(json!(format!(
                "a prompt is already running in session {}; cancel it or wait for its answer",
                session.id
            )))
        })?;
        let input = turn_input(&request.prompt).map_err(invalid_params)?;
        session.clear_cancel();
        // Before the turn starts, so none of its events is missed.
        let events = self.runtime.subscribe_events();
        let mut start = StartTurnRequest::new(&session.id, input.message);
        start.images = input.images;
        {
            let choices = session.choices();
            if let Some((provider, model)) = choices.model.split_once('/') {
                start.provider_override = Some(provider.to_string());
                start.model_override = Some(model.to_string());
            }
            start.reasoning_override = choices.effort;
        }
        let turn_id = self
            .runtime
            .start_turn_with(
                start,
                TurnOptions {
                    traceparent: traceparent(request.meta.as_ref())?,
                    ..TurnOptions::default()
                },
            )
            .await
            .map_err(internal)?;
        session.set_running(Some(turn_id.clone()));
        if session.cancel_requested() {
            let _ = self.runtime.interrupt_turn(&session.id, &turn_id).await;
        }
        let ended = self.follow(&session, &turn_id, events).await;
        session.set_running(None);
        to_value(acp::PromptResponse::new(ended?))
    }

    /// Forwards the turn's events until it ends; returns its stop reason.
    async fn follow(
        self: &Arc<Self>,
        session: &Arc<Session>,
        turn_id: &str,
        mut events: tokio::sync::broadcast::Receiver<EventEnvelope>,
    ) -> Result<acp::StopReason, acp::Error> {
        let mut translator = Translator::new(
            Source::Live,
            session.cwd.clone(),
            self.terminal_meta(),
            self.options.context_window,
        );
        // The last persisted seq handled: after a lag, the log fills the gap.
        let mut last_seq = 0u64;
        loop {
            let batch = match events.recv().await {
                Ok(envelope) => vec![envelope],
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        "session {}: {missed} events were dropped by the bus; reading them from the log",
                        session.id
                    );
                    self.runtime
                        .read_thread_events(&session.id, last_seq)
                        .await
                        .map_err(internal)?
                        .events
                }
                Err(RecvError::Closed) => {
                    return Err(acp::Error::internal_error()
                        .data(json!("the runtime stopped during the turn")));
                }
            };
            for envelope in batch {
                if envelope.thread_id != session.id || envelope.turn_id.as_deref() != Some(turn_id)
                {
                    continue;
                }
                if !envelope.event.is_transient() {
                    if envelope.seq <= last_seq {
                        continue;
                    }
                    last_seq = envelope.seq;
                }
                for update in translator.translate(&envelope.event) {
                    self.peer.update(&session.id, update).await;
                }
                if let RoderEvent::ApprovalRequested(ask) = &envelope.event
                    && self.runtime.is_approval_pending(&ask.approval_id)
                {
                    let request =
                        permission::request(&session.id, ask, translator.diffs_of(&ask.call_id));
                    self.ask(ask.approval_id.clone(), request);
                }
                if let Some(ending) = stop_reason(&envelope.event) {
                    return ending;
                }
            }
        }
    }

    /// Puts one ask to the client and settles it with the answer.
    fn ask(self: &Arc<Self>, approval_id: String, request: acp::RequestPermissionRequest) {
        let agent = self.clone();
        tokio::spawn(async move {
            let answer = agent
                .peer
                .request("session/request_permission", &request)
                .await;
            let answer = permission::decision(answer);
            if let Err(error) =
                agent
                    .runtime
                    .resolve_approval(&approval_id, answer, &agent.client_id())
            {
                // Settled meanwhile: the turn was cancelled, or it timed out.
                tracing::debug!("the client's answer was not taken: {error:#}");
            }
        });
    }
}

/// How a turn's terminal event ends the prompt (`None`: not terminal).
fn stop_reason(event: &RoderEvent) -> Option<Result<acp::StopReason, acp::Error>> {
    Some(match event {
        RoderEvent::TurnCompleted(completed) => Ok(match &completed.incomplete {
            None => acp::StopReason::EndTurn,
            Some(IncompleteAnswer::Refusal | IncompleteAnswer::ContentFilter) => {
                acp::StopReason::Refusal
            }
            // Cut off by the output limit, or incomplete for a reason the
            // provider did not give: never a plain end of turn.
            Some(_) => acp::StopReason::MaxTokens,
        }),
        RoderEvent::TurnInterrupted(_) => Ok(acp::StopReason::Cancelled),
        // The turn hit its limit (Roder bounds a turn by time, not by
        // model requests).
        RoderEvent::TurnDeadlineExceeded(_) => Ok(acp::StopReason::MaxTurnRequests),
        RoderEvent::TurnFailed(failed) => {
            Err(acp::Error::internal_error()
                .data(json!(format!("the turn failed: {}", failed.error))))
        }
        _ => return None,
    })
}

/// The W3C `traceparent` a client put in the prompt's `_meta` (a root key
/// ACP reserves for it): the turn's span joins that trace. Anything else
/// there is not Roder's business; a `traceparent` that is not one is a
/// client error.
fn traceparent(meta: Option<&acp::Meta>) -> Result<Option<String>, acp::Error> {
    let Some(value) = meta.and_then(|meta| meta.get("traceparent")) else {
        return Ok(None);
    };
    match value.as_str() {
        Some(text) if roder_api::telemetry::valid_traceparent(text) => Ok(Some(text.to_string())),
        _ => Err(invalid_params(format!(
            "_meta.traceparent {value} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::events::{TurnCompleted, TurnInterrupted};

    fn completed(incomplete: Option<IncompleteAnswer>) -> RoderEvent {
        RoderEvent::TurnCompleted(TurnCompleted {
            thread_id: "t".into(),
            turn_id: "u".into(),
            final_message: None,
            usage: Default::default(),
            stop_reason: None,
            thread_usage: Default::default(),
            incomplete,
        })
    }

    #[test]
    fn endings_map_to_acp_stop_reasons() {
        let reason = |event: &RoderEvent| stop_reason(event).unwrap().unwrap();
        assert_eq!(reason(&completed(None)), acp::StopReason::EndTurn);
        assert_eq!(
            reason(&completed(Some(IncompleteAnswer::MaxOutputTokens))),
            acp::StopReason::MaxTokens
        );
        assert_eq!(
            reason(&completed(Some(IncompleteAnswer::Refusal))),
            acp::StopReason::Refusal
        );
        let interrupted = RoderEvent::TurnInterrupted(TurnInterrupted {
            thread_id: "t".into(),
            turn_id: "u".into(),
        });
        assert_eq!(reason(&interrupted), acp::StopReason::Cancelled);
    }
}
