//! What a person sees on stderr while `roder exec` runs: one line per tool
//! call as it completes, and a spinner while the model thinks when stderr is
//! a terminal.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use roder_api::events::{IncompleteAnswer, RoderEvent};
use roder_api::stop_reason::StopReason;

/// How the turn ended.
pub enum Ending {
    /// The final answer, and why it is not whole when it is not.
    Completed(String, Option<IncompleteAnswer>),
    Failed(String),
    Interrupted,
    DeadlineExceeded,
}

pub struct Progress {
    json: bool,
    spinner: Option<ProgressBar>,
    /// Call id → one-line summary of its arguments.
    calls: HashMap<String, String>,
    answer: String,
}

const SUMMARY_WIDTH: usize = 100;

impl Progress {
    pub fn new(json: bool) -> Self {
        let spinner = (!json && std::io::stderr().is_terminal()).then(|| {
            let spinner = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
                spinner.set_style(style);
            }
            spinner.enable_steady_tick(Duration::from_millis(100));
            spinner
        });
        Self {
            json,
            spinner,
            calls: HashMap::new(),
            answer: String::new(),
        }
    }

    pub fn json(&self) -> bool {
        self.json
    }

    /// A line for the person watching (never in `--json` mode).
    pub fn note(&self, line: &str) {
        if self.json {
            return;
        }
        match &self.spinner {
            Some(spinner) => spinner.println(line),
            None => eprintln!("{line}"),
        }
    }

    fn status(&self, message: &str) {
        if let Some(spinner) = &self.spinner {
            spinner.set_message(message.to_string());
        }
    }

    pub fn finish(&self) {
        if let Some(spinner) = &self.spinner {
            spinner.finish_and_clear();
        }
    }

    /// Updates the display; returns how the turn ended at its terminal event.
    pub fn handle(&mut self, event: &RoderEvent) -> Option<Ending> {
        match event {
            RoderEvent::InferenceStarted(_) => self.status("thinking…"),
            RoderEvent::MessageDelta(delta) => self.answer.push_str(&delta.text),
            RoderEvent::ToolCallRequested(call) => {
                self.calls.insert(
                    call.call_id.clone(),
                    summarize(&call.tool_name, &call.arguments),
                );
            }
            RoderEvent::ToolCallStarted(call) => {
                let summary = self.calls.get(&call.call_id).cloned().unwrap_or_default();
                self.status(&format!("running {summary}"));
            }
            RoderEvent::ToolCallCompleted(call) => {
                let summary = self
                    .calls
                    .get(&call.call_id)
                    .cloned()
                    .unwrap_or_else(|| call.tool_name.clone().unwrap_or_default());
                let line = if call.is_error {
                    let reason = call
                        .output
                        .as_deref()
                        .and_then(|output| output.lines().next())
                        .unwrap_or("error");
                    format!("✗ {summary} ({} ms): {}", call.duration_ms, clip(reason))
                } else {
                    format!("✓ {summary} ({} ms)", call.duration_ms)
                };
                self.note(&line);
            }
            RoderEvent::RunnerLifecycle(lifecycle) => self.note(&format!(
                "runner {}: {:?}",
                lifecycle.provider_id, lifecycle.action
            )),
            RoderEvent::TurnCompleted(done) => {
                if let Some(line) = stop_note(done.stop_reason.as_ref()) {
                    self.note(&line);
                }
                if let Some(line) = usage_note(&done.usage, &done.thread_usage) {
                    self.note(&line);
                }
                let answer = done
                    .final_message
                    .clone()
                    .unwrap_or_else(|| std::mem::take(&mut self.answer));
                return Some(Ending::Completed(answer, done.incomplete.clone()));
            }
            RoderEvent::TurnFailed(failed) => return Some(Ending::Failed(failed.error.clone())),
            RoderEvent::TurnInterrupted(_) => return Some(Ending::Interrupted),
            RoderEvent::TurnDeadlineExceeded(_) => return Some(Ending::DeadlineExceeded),
            _ => {}
        }
        None
    }
}

/// The turn's tokens (and the thread's, when it had earlier turns), when
/// the engine reported any.
fn usage_note(
    turn: &roder_api::inference::TokenUsage,
    thread: &roder_api::inference::TokenUsage,
) -> Option<String> {
    let total = |usage: &roder_api::inference::TokenUsage| usage.input_tokens + usage.output_tokens;
    if total(turn) == 0 {
        return None;
    }
    let mut line = format!(
        "tokens: {} ({} in, {} cached, {} out, {} reasoning)",
        total(turn),
        turn.input_tokens,
        turn.cached_input_tokens,
        turn.output_tokens,
        turn.reasoning_tokens
    );
    if total(thread) > total(turn) {
        line.push_str(&format!("; thread total {}", total(thread)));
    }
    Some(line)
}

/// A line naming why the model stopped, when that is news: a plain end of
/// the answer (or a stop to run tools) is what everyone expects.
fn stop_note(reason: Option<&StopReason>) -> Option<String> {
    match reason? {
        StopReason::EndTurn | StopReason::ToolUse => None,
        other => Some(format!("model stopped: {other}")),
    }
}

/// `exec_command true`, `write_file src/lib.rs`: the tool and its most
/// telling argument.
fn summarize(tool: &str, arguments: &str) -> String {
    let value: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let detail = ["cmd", "command", "path", "pattern"]
        .iter()
        .find_map(|key| value.get(key).and_then(serde_json::Value::as_str));
    match detail {
        Some(detail) => format!("{tool} {}", clip(detail)),
        None => tool.to_string(),
    }
}

fn clip(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= SUMMARY_WIDTH {
        return line.to_string();
    }
    let clipped: String = line.chars().take(SUMMARY_WIDTH).collect();
    format!("{clipped}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lines_show_the_turn_and_a_longer_threads_total() {
        let turn = roder_api::inference::TokenUsage {
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: 80,
            reasoning_tokens: 5,
        };
        assert_eq!(
            usage_note(&turn, &turn).as_deref(),
            Some("tokens: 120 (100 in, 80 cached, 20 out, 5 reasoning)")
        );
        let mut thread = turn.clone();
        thread.add(&turn);
        assert!(
            usage_note(&turn, &thread)
                .unwrap_or_default()
                .ends_with("; thread total 240")
        );
        assert_eq!(usage_note(&Default::default(), &thread), None);
    }

    #[test]
    fn summaries_name_the_telling_argument() {
        assert_eq!(
            summarize("exec_command", r#"{"cmd":"cargo test"}"#),
            "exec_command cargo test"
        );
        assert_eq!(
            summarize("write_file", r#"{"path":"a.rs","content":"x"}"#),
            "write_file a.rs"
        );
        assert_eq!(summarize("list_files", "{}"), "list_files");
        assert_eq!(summarize("shell", "not json"), "shell");
        assert!(clip(&"x".repeat(300)).ends_with('…'));
    }

    #[test]
    fn only_unusual_stop_reasons_are_shown() {
        assert_eq!(stop_note(None), None);
        assert_eq!(stop_note(Some(&StopReason::EndTurn)), None);
        assert_eq!(stop_note(Some(&StopReason::ToolUse)), None);
        assert_eq!(
            stop_note(Some(&StopReason::MaxOutputTokens)).as_deref(),
            Some("model stopped: max_output_tokens")
        );
    }
}
