//! Runtime events as `session/update`s. One translator serves a live turn
//! and the replay of `session/load`, so a loaded session shows what the
//! live one showed: live, text arrives as deltas (never persisted); in a
//! replay, as the persisted transcript items and final answers.
//!
//! A tool call is announced (`tool_call`, pending, with its kind from the
//! tool's declared effects, title, locations and raw input) when the model
//! asks for it; the diff of an edit joins it when the ask's preview (or the
//! file change, for a call nobody was asked about) is known; then
//! `in_progress` when it runs, and `completed` or `failed` with its output.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1 as acp;
use roder_api::approval::{CallPreview, FilePreview, ToolKind};
use roder_api::events::{RoderEvent, ToolCallCompleted, ToolCallRequested};
use roder_api::transcript::TranscriptItem;
use serde_json::{Value, json};

use crate::diff::texts_of_unified;

/// Whether events come from a running turn or from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Live,
    Replay,
}

/// What is remembered of a call between its events.
#[derive(Debug, Default)]
struct Call {
    execute: bool,
    diffs: Vec<acp::ToolCallContent>,
}

pub(crate) struct Translator {
    source: Source,
    /// The session's root, for paths a tool was given relative to it.
    cwd: PathBuf,
    /// Zed's terminal `_meta` extension for command output.
    terminal_meta: bool,
    /// The model's context window, for `usage_update` (none is sent
    /// without it).
    window: Option<u64>,
    calls: HashMap<String, Call>,
    /// The last assistant text replayed: a final answer equal to it is not
    /// shown twice (logs from before answers were stored once).
    last_answer: Option<String>,
}

impl Translator {
    pub fn new(source: Source, cwd: PathBuf, terminal_meta: bool, window: Option<u64>) -> Self {
        Self {
            source,
            cwd,
            terminal_meta,
            window,
            calls: HashMap::new(),
            last_answer: None,
        }
    }

    /// The updates `event` makes, in order.
    pub fn translate(&mut self, event: &RoderEvent) -> Vec<acp::SessionUpdate> {
        let live = self.source == Source::Live;
        match event {
            RoderEvent::MessageDelta(delta) if live => vec![message(&delta.text)],
            RoderEvent::ReasoningDelta(delta) if live => vec![thought(&delta.text)],
            RoderEvent::TranscriptItemAppended(appended) if !live => self.item(&appended.item),
            RoderEvent::TurnCompleted(completed) if !live => match &completed.final_message {
                Some(text) if self.last_answer.as_deref() != Some(text.as_str()) => {
                    self.last_answer = Some(text.clone());
                    vec![message(text)]
                }
                _ => Vec::new(),
            },
            RoderEvent::ToolCallRequested(requested) => vec![self.requested(requested)],
            RoderEvent::ApprovalRequested(ask) => self
                .previewed(&ask.call_id, &ask.preview)
                .into_iter()
                .collect(),
            RoderEvent::ToolCallStarted(started) => vec![acp::SessionUpdate::ToolCallUpdate(
                acp::ToolCallUpdate::new(
                    started.call_id.clone(),
                    acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::InProgress),
                ),
            )],
            RoderEvent::FileChangePreviewReady(change) => {
                let call = self.calls.entry(change.call_id.clone()).or_default();
                let path = PathBuf::from(&change.path);
                if call.diffs.iter().any(|content| is_diff_of(content, &path)) {
                    return Vec::new();
                }
                let (old, new) = texts_of_unified(&change.diff);
                call.diffs.push(diff(&path, old, new));
                vec![acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(
                        change.call_id.clone(),
                        acp::ToolCallUpdateFields::new().content(call.diffs.clone()),
                    ),
                )]
            }
            RoderEvent::ToolCallCompleted(completed) => self.completed(completed),
            RoderEvent::UsageUpdated(usage) => match self.window {
                Some(window) => vec![acp::SessionUpdate::UsageUpdate(acp::UsageUpdate::new(
                    usage.usage.input_tokens + usage.usage.output_tokens,
                    window,
                ))],
                None => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    fn item(&mut self, item: &TranscriptItem) -> Vec<acp::SessionUpdate> {
        match item {
            TranscriptItem::UserMessage { text, images } => {
                let mut updates = vec![acp::SessionUpdate::UserMessageChunk(
                    acp::ContentChunk::new(text_block(text)),
                )];
                for image in images {
                    if let Some(block) = image_block(image) {
                        updates.push(acp::SessionUpdate::UserMessageChunk(
                            acp::ContentChunk::new(block),
                        ));
                    }
                }
                self.last_answer = None;
                updates
            }
            TranscriptItem::AssistantMessage { text } => {
                self.last_answer = Some(text.clone());
                vec![message(text)]
            }
            TranscriptItem::Reasoning { text, .. } if !text.is_empty() => vec![thought(text)],
            _ => Vec::new(),
        }
    }

    fn requested(&mut self, requested: &ToolCallRequested) -> acp::SessionUpdate {
        let arguments: Value = serde_json::from_str(&requested.arguments)
            .unwrap_or_else(|_| Value::String(requested.arguments.clone()));
        let kind = requested
            .effects
            .map_or(acp::ToolKind::Other, |effects| tool_kind(effects.kind()));
        let execute = kind == acp::ToolKind::Execute;
        self.calls.insert(
            requested.call_id.clone(),
            Call {
                execute,
                diffs: Vec::new(),
            },
        );
        let mut call = acp::ToolCall::new(
            requested.call_id.clone(),
            title(&requested.tool_name, &arguments),
        )
        .kind(kind)
        .status(acp::ToolCallStatus::Pending)
        .locations(locations(&arguments, &self.cwd))
        .raw_input(arguments);
        if execute && self.terminal_meta && self.source == Source::Live {
            call = call
                .content(vec![acp::ToolCallContent::Terminal(acp::Terminal::new(
                    requested.call_id.clone(),
                ))])
                .meta(meta(json!({"terminal_info": {
                    "terminal_id": requested.call_id,
                    "cwd": self.cwd,
                }})));
        }
        acp::SessionUpdate::ToolCall(call)
    }

    /// The diffs an ask's preview shows, added to the call.
    fn previewed(&mut self, call_id: &str, preview: &CallPreview) -> Option<acp::SessionUpdate> {
        if preview.files.is_empty() {
            return None;
        }
        let call = self.calls.entry(call_id.to_string()).or_default();
        call.diffs = preview.files.iter().map(file_diff).collect();
        Some(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(
                call_id.to_string(),
                acp::ToolCallUpdateFields::new().content(call.diffs.clone()),
            ),
        ))
    }

    /// The call's diffs so far (for a permission request's tool call).
    pub fn diffs_of(&self, call_id: &str) -> Vec<acp::ToolCallContent> {
        self.calls
            .get(call_id)
            .map(|call| call.diffs.clone())
            .unwrap_or_default()
    }

    fn completed(&mut self, completed: &ToolCallCompleted) -> Vec<acp::SessionUpdate> {
        let call = self.calls.remove(&completed.call_id).unwrap_or_default();
        let status = if completed.is_error {
            acp::ToolCallStatus::Failed
        } else {
            acp::ToolCallStatus::Completed
        };
        let output = completed.output.clone().unwrap_or_default();
        let raw_output = json!({"output": output, "data": completed.data});
        let id = completed.call_id.clone();
        if call.execute && self.terminal_meta && self.source == Source::Live {
            let exit_code = completed.data.get("exit_code").cloned();
            return vec![
                acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(id.clone(), acp::ToolCallUpdateFields::new()).meta(
                        meta(json!({"terminal_output": {"terminal_id": id, "data": output}})),
                    ),
                ),
                acp::SessionUpdate::ToolCallUpdate(
                    acp::ToolCallUpdate::new(
                        id.clone(),
                        acp::ToolCallUpdateFields::new()
                            .status(status)
                            .raw_output(raw_output),
                    )
                    .meta(meta(json!({"terminal_exit": {
                        "terminal_id": id,
                        "exit_code": exit_code,
                        "signal": null,
                    }}))),
                ),
            ];
        }
        let mut content = call.diffs;
        if !output.is_empty() {
            let text = if call.execute {
                fenced(&output)
            } else {
                output
            };
            content.push(acp::ToolCallContent::from(text_block(&text)));
        }
        vec![acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(
                id,
                acp::ToolCallUpdateFields::new()
                    .status(status)
                    .content(content)
                    .raw_output(raw_output),
            ),
        )]
    }
}

fn message(text: &str) -> acp::SessionUpdate {
    acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(text_block(text)))
}

fn thought(text: &str) -> acp::SessionUpdate {
    acp::SessionUpdate::AgentThoughtChunk(acp::ContentChunk::new(text_block(text)))
}

pub(crate) fn text_block(text: &str) -> acp::ContentBlock {
    acp::ContentBlock::Text(acp::TextContent::new(text))
}

/// A `data:` URL back as an image block (other URLs as a link to it).
fn image_block(url: &str) -> Option<acp::ContentBlock> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (mime, data) = rest.split_once(";base64,")?;
        return Some(acp::ContentBlock::Image(acp::ImageContent::new(data, mime)));
    }
    Some(acp::ContentBlock::ResourceLink(acp::ResourceLink::new(
        "image", url,
    )))
}

fn meta(value: Value) -> acp::Meta {
    match value {
        Value::Object(map) => map,
        _ => acp::Meta::new(),
    }
}

pub(crate) fn tool_kind(kind: ToolKind) -> acp::ToolKind {
    match kind {
        ToolKind::Read => acp::ToolKind::Read,
        ToolKind::Edit => acp::ToolKind::Edit,
        ToolKind::Delete => acp::ToolKind::Delete,
        ToolKind::Move => acp::ToolKind::Move,
        ToolKind::Search => acp::ToolKind::Search,
        ToolKind::Execute => acp::ToolKind::Execute,
        ToolKind::Fetch => acp::ToolKind::Fetch,
        ToolKind::Other => acp::ToolKind::Other,
    }
}

/// One line for a person: the command, or the tool and the path it works on.
fn title(tool_name: &str, arguments: &Value) -> String {
    for key in ["cmd", "command"] {
        if let Some(command) = arguments.get(key).and_then(Value::as_str) {
            return format!("Run `{command}`");
        }
    }
    for key in ["path", "file_path", "pattern", "query", "url"] {
        if let Some(value) = arguments.get(key).and_then(Value::as_str) {
            return format!("{tool_name} {value}");
        }
    }
    tool_name.to_string()
}

/// The files a call names, absolute, with a 1-based line when it gives one.
fn locations(arguments: &Value, cwd: &Path) -> Vec<acp::ToolCallLocation> {
    let line = ["line", "start_line"]
        .iter()
        .find_map(|key| arguments.get(*key).and_then(Value::as_u64))
        .and_then(|line| u32::try_from(line).ok())
        .filter(|line| *line > 0);
    let mut paths: Vec<&str> = ["path", "file_path"]
        .iter()
        .filter_map(|key| arguments.get(*key).and_then(Value::as_str))
        .collect();
    if let Some(many) = arguments.get("paths").and_then(Value::as_array) {
        paths.extend(many.iter().filter_map(Value::as_str));
    }
    paths
        .into_iter()
        .map(|path| {
            let location = acp::ToolCallLocation::new(cwd.join(path));
            match line {
                Some(line) => location.line(line),
                None => location,
            }
        })
        .collect()
}

fn file_diff(file: &FilePreview) -> acp::ToolCallContent {
    let path = PathBuf::from(&file.path);
    match (&file.old_text, &file.new_text) {
        (old, Some(new)) => diff(&path, old.clone(), new.clone()),
        // Deleted.
        (Some(old), None) => diff(&path, Some(old.clone()), String::new()),
        // Too large to carry whole: the diff's hunks.
        (None, None) => {
            let (old, new) = texts_of_unified(&file.diff);
            diff(&path, old, new)
        }
    }
}

fn diff(path: &Path, old: Option<String>, new: String) -> acp::ToolCallContent {
    acp::ToolCallContent::Diff(acp::Diff::new(path, new).old_text(old))
}

fn is_diff_of(content: &acp::ToolCallContent, path: &Path) -> bool {
    matches!(content, acp::ToolCallContent::Diff(diff) if diff.path == path)
}

fn fenced(output: &str) -> String {
    let fence = if output.contains("```") {
        "````"
    } else {
        "```"
    };
    format!("{fence}\n{}\n{fence}", output.trim_end_matches('\n'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::approval::ToolEffects;
    use roder_api::events::{MessageDeltaEvent, ToolCallStarted, TranscriptItemAppended};

    fn wire(update: &acp::SessionUpdate) -> Value {
        serde_json::to_value(update).unwrap()
    }

    fn requested(arguments: &str, effects: ToolEffects) -> RoderEvent {
        RoderEvent::ToolCallRequested(ToolCallRequested {
            thread_id: "t".into(),
            turn_id: "u".into(),
            call_id: "c1".into(),
            tool_name: "write_file".into(),
            arguments: arguments.into(),
            effects: Some(effects),
        })
    }

    #[test]
    fn a_call_is_announced_then_runs_then_completes_with_its_diff() {
        let mut translator = Translator::new(Source::Live, "/w".into(), false, None);
        let announced = translator.translate(&requested(
            r#"{"path":"a.txt","content":"hi"}"#,
            ToolEffects::WRITE,
        ));
        let announced = wire(&announced[0]);
        assert_eq!(announced["sessionUpdate"], "tool_call");
        assert_eq!(announced["toolCallId"], "c1");
        assert_eq!(announced["kind"], "edit");
        // Pending is the schema's default, which it leaves off the wire.
        assert!(
            announced
                .get("status")
                .is_none_or(|status| status == "pending")
        );
        assert_eq!(announced["locations"][0]["path"], "/w/a.txt");
        assert_eq!(announced["rawInput"]["content"], "hi");
        let preview = CallPreview::for_files(vec![FilePreview {
            path: "/w/a.txt".into(),
            diff: "--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+hi\n".into(),
            old_text: None,
            new_text: Some("hi\n".into()),
        }]);
        let diffs = translator.previewed("c1", &preview).unwrap();
        assert_eq!(wire(&diffs)["content"][0]["type"], "diff");
        assert_eq!(translator.diffs_of("c1").len(), 1);
        let running = translator.translate(&RoderEvent::ToolCallStarted(ToolCallStarted {
            thread_id: "t".into(),
            turn_id: "u".into(),
            call_id: "c1".into(),
            tool_name: "write_file".into(),
            approved_by: None,
        }));
        assert_eq!(wire(&running[0])["status"], "in_progress");
        let done = translator.translate(&RoderEvent::ToolCallCompleted(ToolCallCompleted {
            thread_id: "t".into(),
            turn_id: "u".into(),
            call_id: "c1".into(),
            tool_name: Some("write_file".into()),
            output: Some("wrote".into()),
            is_error: false,
            data: json!({}),
            duration_ms: 1,
        }));
        let done = wire(&done[0]);
        assert_eq!(done["status"], "completed");
        assert_eq!(done["content"][0]["newText"], "hi\n");
        assert_eq!(done["content"][1]["content"]["text"], "wrote");
        assert_eq!(done["rawOutput"]["output"], "wrote");
    }

    #[test]
    fn deltas_are_live_and_items_are_replayed() {
        let delta = RoderEvent::MessageDelta(MessageDeltaEvent {
            thread_id: "t".into(),
            turn_id: "u".into(),
            text: "Hel".into(),
            phase: None,
        });
        let item = RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: "t".into(),
            turn_id: "u".into(),
            item: TranscriptItem::UserMessage {
                text: "go".into(),
                images: vec!["data:image/png;base64,AAAA".into()],
            },
        });
        let mut live = Translator::new(Source::Live, "/w".into(), false, None);
        assert_eq!(live.translate(&delta).len(), 1);
        assert!(live.translate(&item).is_empty());
        let mut replay = Translator::new(Source::Replay, "/w".into(), false, None);
        assert!(replay.translate(&delta).is_empty());
        let replayed = replay.translate(&item);
        assert_eq!(wire(&replayed[0])["sessionUpdate"], "user_message_chunk");
        assert_eq!(wire(&replayed[1])["content"]["mimeType"], "image/png");
    }

    #[test]
    fn commands_use_the_terminal_extension_when_asked() {
        let mut translator = Translator::new(Source::Live, "/w".into(), true, None);
        let announced = translator.translate(&requested(r#"{"cmd":"make"}"#, ToolEffects::EXECUTE));
        let announced = wire(&announced[0]);
        assert_eq!(announced["title"], "Run `make`");
        assert_eq!(announced["content"][0]["type"], "terminal");
        assert_eq!(announced["_meta"]["terminal_info"]["terminal_id"], "c1");
        let done = translator.translate(&RoderEvent::ToolCallCompleted(ToolCallCompleted {
            thread_id: "t".into(),
            turn_id: "u".into(),
            call_id: "c1".into(),
            tool_name: None,
            output: Some("ok".into()),
            is_error: false,
            data: json!({"exit_code": 0}),
            duration_ms: 1,
        }));
        assert_eq!(wire(&done[0])["_meta"]["terminal_output"]["data"], "ok");
        assert_eq!(wire(&done[1])["_meta"]["terminal_exit"]["exit_code"], 0);
    }
}
