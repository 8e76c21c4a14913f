//! What the model reads back from an MCP tool call: the server's content
//! blocks as text (images and audio noted, never inlined as base64), its
//! structured content kept in `data`, and `isError` kept.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use roder_api::tools::{ToolCall, ToolResult};

/// The most text one result gives the model; the rest is cut with a note.
pub const MAX_RESULT_TEXT: usize = 64 * 1024;

/// Maps a server's answer to the result of `call` on `server`'s `tool`.
pub fn tool_result(
    call: &ToolCall,
    server: &str,
    tool: &str,
    result: CallToolResult,
) -> ToolResult {
    let mut parts = Vec::new();
    let mut notes = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::Image(image) => {
                let note = format!(
                    "[image: {}, {} bytes of base64, not shown]",
                    image.mime_type,
                    image.data.len()
                );
                notes.push(serde_json::json!({"type": "image", "mime_type": image.mime_type}));
                parts.push(note);
            }
            ContentBlock::Audio(audio) => {
                notes.push(serde_json::json!({"type": "audio", "mime_type": audio.mime_type}));
                parts.push(format!(
                    "[audio: {}, {} bytes of base64, not shown]",
                    audio.mime_type,
                    audio.data.len()
                ));
            }
            ContentBlock::Resource(embedded) => match &embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    parts.push(format!("[resource {uri}]\n{text}"));
                }
                ResourceContents::BlobResourceContents { uri, mime_type, .. } => {
                    parts.push(format!(
                        "[resource {uri}: {} blob, not shown]",
                        mime_type.as_deref().unwrap_or("binary")
                    ));
                }
                _ => parts.push("[resource of an unknown kind, not shown]".to_string()),
            },
            ContentBlock::ResourceLink(link) => {
                parts.push(format!("[resource link: {} ({})]", link.uri, link.name));
            }
            _ => parts.push("[content of a kind Roder does not read, not shown]".to_string()),
        }
    }
    // Structured content is the whole answer when the server sent no text.
    if let Some(structured) = &result.structured_content
        && !result
            .content
            .iter()
            .any(|block| matches!(block, ContentBlock::Text(_)))
    {
        parts.push(structured.to_string());
    }
    let mut text = parts.join("\n");
    let is_error = result.is_error.unwrap_or(false);
    if text.is_empty() {
        text = if is_error {
            "the tool failed and said nothing more".to_string()
        } else {
            "(no output)".to_string()
        };
    }
    let truncated = cap(&mut text);
    let data = serde_json::json!({
        "mcp_server": server,
        "mcp_tool": tool,
        "structured_content": result.structured_content,
        "media": notes,
        "truncated": truncated,
    });
    ToolResult {
        id: call.id.clone(),
        name: call.name.clone(),
        text,
        data,
        is_error,
    }
}

/// Cuts `text` to [`MAX_RESULT_TEXT`] bytes at a character boundary.
fn cap(text: &mut String) -> bool {
    if text.len() <= MAX_RESULT_TEXT {
        return false;
    }
    let mut end = MAX_RESULT_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let dropped = text.len() - end;
    text.truncate(end);
    text.push_str(&format!("\n[... {dropped} more bytes cut]"));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: "mcp__s__t".into(),
            arguments: serde_json::json!({}),
        }
    }

    fn parse(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn text_blocks_join_and_images_are_noted_not_inlined() {
        let result = tool_result(
            &call(),
            "s",
            "t",
            parse(serde_json::json!({"content": [
                {"type": "text", "text": "first"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "text", "text": "second"}
            ]})),
        );
        assert!(!result.is_error);
        assert_eq!(
            result.text,
            "first\n[image: image/png, 8 bytes of base64, not shown]\nsecond"
        );
        assert!(!result.text.contains("aGVsbG8="));
        assert_eq!(result.data["media"][0]["type"], "image");
        assert_eq!(result.data["mcp_server"], "s");
    }

    #[test]
    fn structured_content_is_kept_and_is_the_text_when_there_is_none() {
        let result = tool_result(
            &call(),
            "s",
            "t",
            parse(serde_json::json!({"content": [], "structuredContent": {"n": 3}})),
        );
        assert_eq!(result.text, r#"{"n":3}"#);
        assert_eq!(result.data["structured_content"]["n"], 3);
    }

    #[test]
    fn is_error_is_kept() {
        let result = tool_result(
            &call(),
            "s",
            "t",
            parse(
                serde_json::json!({"content": [{"type": "text", "text": "bad tz"}], "isError": true}),
            ),
        );
        assert!(result.is_error);
        assert_eq!(result.text, "bad tz");
        let empty = tool_result(
            &call(),
            "s",
            "t",
            parse(serde_json::json!({"isError": true})),
        );
        assert!(empty.is_error);
        assert!(!empty.text.is_empty());
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_RESULT_TEXT);
        let result = tool_result(
            &call(),
            "s",
            "t",
            parse(serde_json::json!({"content": [{"type": "text", "text": long}]})),
        );
        assert!(result.text.len() < MAX_RESULT_TEXT + 100);
        assert!(result.text.ends_with("more bytes cut]"));
        assert_eq!(result.data["truncated"], true);
    }
}
