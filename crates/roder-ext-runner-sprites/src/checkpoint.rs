//! Reading the NDJSON stream that `POST /v1/sprites/{name}/checkpoint` returns.
//!
//! The server answers 200 before the checkpoint is done and reports progress
//! as `{"type":"info"|"error"|"complete", ...}` lines. Failures arrive
//! in-band under HTTP 200, so every line is scanned. The new checkpoint id is
//! documented only inside the `complete` text ("Checkpoint v8 created"); a
//! dedicated `checkpoint_id`/`id` field is preferred when a server sends one.

use serde_json::Value;

use crate::ndjson::LineBuffer;

/// A checkpoint the server reported as created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckpointCreated {
    /// The checkpoint id, e.g. `v8`.
    pub id: String,
    /// The `complete` line's text, kept for the snapshot's metadata.
    pub message: String,
}

/// Incremental reader of a checkpoint stream.
#[derive(Debug, Default)]
pub(crate) struct CheckpointStream {
    lines: LineBuffer,
    created: Option<CheckpointCreated>,
    last_line: Option<String>,
}

impl CheckpointStream {
    /// Consumes one chunk; an in-band `error` line fails at once with its text.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<(), String> {
        for line in self.lines.push(chunk) {
            self.line(line)?;
        }
        Ok(())
    }

    /// Ends the stream: the checkpoint, or why there is none.
    pub(crate) fn finish(mut self) -> Result<CheckpointCreated, String> {
        for line in self.lines.finish() {
            self.line(line)?;
        }
        match self.created {
            Some(created) => Ok(created),
            None => Err(match self.last_line {
                Some(line) => {
                    format!("the stream ended without a `complete` line (last line: {line})")
                }
                None => "the stream ended without a `complete` line (it was empty)".to_string(),
            }),
        }
    }

    fn line(&mut self, line: String) -> Result<(), String> {
        let parsed: Option<Value> = serde_json::from_str(&line).ok();
        let kind = parsed
            .as_ref()
            .and_then(|v| v.get("type"))
            .and_then(Value::as_str)
            .map(str::to_string);
        match (kind.as_deref(), parsed) {
            (Some("error"), Some(event)) => {
                let message = ["error", "message", "data"]
                    .iter()
                    .find_map(|key| event.get(*key).map(text_of))
                    .unwrap_or_else(|| line.clone());
                return Err(message);
            }
            (Some("complete"), Some(event)) => {
                let message = event.get("data").map(text_of).unwrap_or_default();
                let id = id_field(&event)
                    .or_else(|| event.get("data").and_then(id_field))
                    .or_else(|| version_token(&message))
                    .ok_or_else(|| {
                        format!("checkpoint completed but no id was found in: {line}")
                    })?;
                self.created = Some(CheckpointCreated { id, message });
            }
            _ => {}
        }
        self.last_line = Some(line);
        Ok(())
    }
}

/// A `checkpoint_id` or `id` field, as a string or a number.
fn id_field(value: &Value) -> Option<String> {
    ["checkpoint_id", "id"]
        .iter()
        .find_map(|key| match value.get(*key)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
}

/// The first `v<digits>` word of a message like "Checkpoint v8 created".
fn version_token(message: &str) -> Option<String> {
    message
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find(|word| {
            word.strip_prefix('v').is_some_and(|digits| {
                !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
            })
        })
        .map(str::to_string)
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(chunks: &[&str]) -> Result<CheckpointCreated, String> {
        let mut stream = CheckpointStream::default();
        for chunk in chunks {
            stream.push(chunk.as_bytes())?;
        }
        stream.finish()
    }

    #[test]
    fn takes_the_id_from_the_complete_text() {
        let body = concat!(
            r#"{"type":"info","data":"Creating checkpoint","time":"2026-01-01T00:00:00Z"}"#,
            "\n",
            r#"{"type":"complete","data":"Checkpoint v8 created","time":"2026-01-01T00:00:01Z"}"#,
            "\n"
        );
        for at in 0..=body.len() {
            let created = read(&[&body[..at], &body[at..]]).unwrap();
            assert_eq!(created.id, "v8", "split at {at}");
            assert_eq!(created.message, "Checkpoint v8 created");
        }
    }

    #[test]
    fn prefers_an_explicit_id_field() {
        let created =
            read(&[r#"{"type":"complete","checkpoint_id":"v3","data":"Checkpoint v9 created"}"#])
                .unwrap();
        assert_eq!(created.id, "v3");
        let created = read(&[r#"{"type":"complete","data":{"id":"v4"}}"#]).unwrap();
        assert_eq!(created.id, "v4");
    }

    #[test]
    fn in_band_errors_fail_even_under_http_200() {
        let err = read(&[
            "{\"type\":\"info\",\"data\":\"x\"}\n",
            "{\"type\":\"error\",\"error\":\"disk full\"}\n",
            "{\"type\":\"complete\",\"data\":\"Checkpoint v1 created\"}\n",
        ])
        .unwrap_err();
        assert_eq!(err, "disk full");
    }

    #[test]
    fn a_stream_without_completion_is_an_error() {
        let err = read(&["{\"type\":\"info\",\"data\":\"working\"}\n"]).unwrap_err();
        assert!(err.contains("without a `complete` line"), "{err}");
        assert!(err.contains("working"), "{err}");
        assert!(read(&[]).unwrap_err().contains("empty"));
    }

    #[test]
    fn a_completion_without_an_id_is_an_error() {
        let err = read(&[r#"{"type":"complete","data":"done"}"#]).unwrap_err();
        assert!(err.contains("no id"), "{err}");
    }

    #[test]
    fn version_tokens_are_whole_words() {
        assert_eq!(
            version_token("Checkpoint v12 created").as_deref(),
            Some("v12")
        );
        assert_eq!(
            version_token("Checkpoint vx created; v7."),
            Some("v7".to_string())
        );
        assert_eq!(version_token("v"), None);
        assert_eq!(version_token("dev2 build"), None);
    }

    proptest! {
        #[test]
        fn any_stream_bytes_end_in_a_result_without_panicking(
            lines in proptest::collection::vec(prop_oneof![
                Just(r#"{"type":"complete","data":"Checkpoint v3 created"}"#.to_string()),
                Just(r#"{"type":"error","error":"boom"}"#.to_string()),
                Just(r#"{"type":"info","data":7}"#.to_string()),
                Just(r#"{"type":"complete","data":{"id":12}}"#.to_string()),
                ".{0,24}",
            ], 0..6),
            noise in proptest::collection::vec(any::<u8>(), 0..64),
            cut in any::<usize>(),
        ) {
            let mut body = lines.join("\n").into_bytes();
            body.extend_from_slice(&noise);
            let whole = {
                let mut stream = CheckpointStream::default();
                stream.push(&body).and_then(|()| stream.finish())
            };
            let at = cut % (body.len() + 1);
            let mut stream = CheckpointStream::default();
            let split = stream
                .push(&body[..at])
                .and_then(|()| stream.push(&body[at..]))
                .and_then(|()| stream.finish());
            prop_assert_eq!(split, whole);
        }

        #[test]
        fn version_tokens_of_any_text(text in any::<String>()) {
            if let Some(token) = version_token(&text) {
                prop_assert!(token.starts_with('v') && token.len() > 1);
            }
        }
    }
}
