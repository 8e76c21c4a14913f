//! Decoding the body of an HTTP exec response (`POST /v1/sprites/{name}/exec`).
//!
//! The body is a series of frames, each `stream byte + payload` with **no
//! length prefix**: `0x01` stdout, `0x02` stderr, `0x03` exit followed by one
//! byte holding the exit code. The server sends each frame as its own HTTP
//! chunk, but chunk boundaries do not survive proxies, TLS records or client
//! read buffering, so this decoder never relies on them. It treats the body as
//! one byte stream in which `0x01`–`0x03` always start a frame.
//!
//! The price of that robustness: output that itself contains the control
//! bytes `0x01`–`0x03` cannot be told apart from frame markers (the format has
//! no way to say which it is), so such bytes switch streams instead of being
//! kept. Text output never contains them. Any other byte, including `0x00`, is
//! payload of the current stream; bytes before the first marker count as
//! stdout. Because the decoder is a pure function of the concatenated bytes,
//! splitting or coalescing chunks never changes its result.

use serde::Deserialize;

/// Stream byte that starts a stdout frame.
pub(crate) const STDOUT: u8 = 0x01;
/// Stream byte that starts a stderr frame.
pub(crate) const STDERR: u8 = 0x02;
/// Stream byte that starts the exit frame; the next byte is the exit code.
pub(crate) const EXIT: u8 = 0x03;

/// Most bytes kept per stream; a runaway command must not exhaust memory.
pub(crate) const DEFAULT_STREAM_LIMIT: usize = 32 * 1024 * 1024;

/// What one exec produced, decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ExecOutput {
    pub stdout: String,
    pub stderr: String,
    /// `None` when the response ended without an exit frame.
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// Incremental decoder: feed it every chunk in order with [`push`], then take
/// the result with [`take_output`]. Partial output stays available when the
/// request is abandoned half way (deadline, cancellation).
///
/// [`push`]: FrameDecoder::push
/// [`take_output`]: FrameDecoder::take_output
#[derive(Debug)]
pub(crate) struct FrameDecoder {
    current: Stream,
    awaiting_exit_code: bool,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    stdout_dropped: usize,
    stderr_dropped: usize,
    exit_code: Option<u8>,
    limit: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::with_limit(DEFAULT_STREAM_LIMIT)
    }
}

impl FrameDecoder {
    /// A decoder that keeps at most `limit` bytes of each stream.
    pub(crate) fn with_limit(limit: usize) -> Self {
        Self {
            current: Stream::Stdout,
            awaiting_exit_code: false,
            stdout: Vec::new(),
            stderr: Vec::new(),
            stdout_dropped: 0,
            stderr_dropped: 0,
            exit_code: None,
            limit,
        }
    }

    /// Consumes one chunk of the response body, wherever it was cut. Any
    /// bytes are accepted.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        loop {
            if self.awaiting_exit_code {
                let Some((&code, tail)) = rest.split_first() else {
                    return;
                };
                self.exit_code = Some(code);
                self.awaiting_exit_code = false;
                rest = tail;
            }
            match rest
                .iter()
                .position(|b| matches!(*b, STDOUT | STDERR | EXIT))
            {
                None => {
                    self.append(rest);
                    return;
                }
                Some(at) => {
                    let (payload, marked) = rest.split_at(at);
                    self.append(payload);
                    let Some((&marker, tail)) = marked.split_first() else {
                        return;
                    };
                    match marker {
                        STDOUT => self.current = Stream::Stdout,
                        STDERR => self.current = Stream::Stderr,
                        _ => self.awaiting_exit_code = true,
                    }
                    rest = tail;
                }
            }
        }
    }

    /// Takes what was decoded so far, leaving the decoder empty. Output past
    /// the per-stream limit is replaced by a note saying how much was dropped.
    pub(crate) fn take_output(&mut self) -> ExecOutput {
        let stdout = String::from_utf8_lossy(&std::mem::take(&mut self.stdout)).into_owned();
        let mut stderr = String::from_utf8_lossy(&std::mem::take(&mut self.stderr)).into_owned();
        if self.stdout_dropped > 0 {
            push_note(
                &mut stderr,
                &format!(
                    "stdout truncated: {} bytes past the {}-byte limit were dropped",
                    self.stdout_dropped, self.limit
                ),
            );
        }
        if self.stderr_dropped > 0 {
            push_note(
                &mut stderr,
                &format!(
                    "stderr truncated: {} bytes past the {}-byte limit were dropped",
                    self.stderr_dropped, self.limit
                ),
            );
        }
        // Notes go to stderr so stdout stays parseable by the caller.
        self.stdout_dropped = 0;
        self.stderr_dropped = 0;
        ExecOutput {
            stdout,
            stderr,
            exit_code: self.exit_code.take().map(i32::from),
        }
    }

    fn append(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let (buf, dropped) = match self.current {
            Stream::Stdout => (&mut self.stdout, &mut self.stdout_dropped),
            Stream::Stderr => (&mut self.stderr, &mut self.stderr_dropped),
        };
        let room = self.limit.saturating_sub(buf.len());
        let (kept, over) = bytes.split_at(bytes.len().min(room));
        buf.extend_from_slice(kept);
        *dropped = dropped.saturating_add(over.len());
    }
}

/// Collects one exec's output, whichever body form the server chose.
#[derive(Debug, Default)]
pub(crate) struct ExecCollector {
    frames: FrameDecoder,
    json: Option<ExecOutput>,
}

impl ExecCollector {
    /// A collector that keeps at most `limit` bytes of each framed stream
    /// (the policy's `limits.output_bytes`, capped at [`DEFAULT_STREAM_LIMIT`]).
    pub(crate) fn with_limit(limit: usize) -> Self {
        Self {
            frames: FrameDecoder::with_limit(limit.min(DEFAULT_STREAM_LIMIT)),
            json: None,
        }
    }

    /// Feeds a chunk of a framed (binary) body.
    pub(crate) fn push_frames(&mut self, chunk: &[u8]) {
        self.frames.push(chunk);
    }

    /// Records a complete JSON body.
    pub(crate) fn set_json(&mut self, output: ExecOutput) {
        self.json = Some(output);
    }

    /// What was collected so far (all of it once the body has ended).
    pub(crate) fn take_output(&mut self) -> ExecOutput {
        self.json
            .take()
            .unwrap_or_else(|| self.frames.take_output())
    }
}

/// Appends a `[roder]` note on its own line, so notes never glue onto output.
pub(crate) fn push_note(stderr: &mut String, note: &str) {
    if !stderr.is_empty() && !stderr.ends_with('\n') {
        stderr.push('\n');
    }
    stderr.push_str("[roder] ");
    stderr.push_str(note);
    stderr.push('\n');
}

/// The JSON form some servers answer with (`application/json`). No official
/// source documents it; it is accepted so a server that buffers its output
/// still works.
#[derive(Debug, Deserialize)]
struct JsonExecBody {
    #[serde(default, alias = "code")]
    exit_code: Option<i32>,
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    stderr: Option<String>,
}

/// Decodes an `application/json` exec body: `{exit_code|code, stdout, stderr}`.
pub(crate) fn decode_json_body(body: &[u8]) -> Result<ExecOutput, serde_json::Error> {
    let parsed: JsonExecBody = serde_json::from_slice(body)?;
    Ok(ExecOutput {
        stdout: parsed.stdout.unwrap_or_default(),
        stderr: parsed.stderr.unwrap_or_default(),
        exit_code: parsed.exit_code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frames() -> Vec<u8> {
        let mut body = Vec::new();
        body.push(STDOUT);
        body.extend_from_slice(b"hello\n");
        body.push(STDERR);
        body.extend_from_slice(b"warn: \x00binary ok\n");
        body.push(STDOUT);
        body.extend_from_slice("wörld\n".as_bytes());
        body.extend_from_slice(&[EXIT, 7]);
        body
    }

    fn decode(chunks: &[&[u8]]) -> ExecOutput {
        let mut decoder = FrameDecoder::default();
        for chunk in chunks {
            decoder.push(chunk);
        }
        decoder.take_output()
    }

    #[test]
    fn decodes_one_frame_per_chunk() {
        let out = decode(&[b"\x01hi\n", b"\x02oops\n", b"\x03\x02"]);
        assert_eq!(out.stdout, "hi\n");
        assert_eq!(out.stderr, "oops\n");
        assert_eq!(out.exit_code, Some(2));
    }

    #[test]
    fn same_result_when_split_at_every_byte_boundary() {
        let body = frames();
        let whole = decode(&[&body]);
        assert_eq!(whole.stdout, "hello\nwörld\n");
        assert_eq!(whole.stderr, "warn: \x00binary ok\n");
        assert_eq!(whole.exit_code, Some(7));
        for at in 0..=body.len() {
            let (a, b) = body.split_at(at);
            assert_eq!(decode(&[a, b]), whole, "split at byte {at}");
        }
        for at in 0..=body.len() {
            for end in at..=body.len() {
                let parts = [&body[..at], &body[at..end], &body[end..]];
                assert_eq!(decode(&parts), whole, "split at {at} and {end}");
            }
        }
        let bytewise: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(decode(&bytewise), whole);
    }

    #[test]
    fn exit_code_byte_may_look_like_a_marker() {
        for code in [0u8, 1, 2, 3, 255] {
            let out = decode(&[&[STDOUT, b'x', EXIT], &[code]]);
            assert_eq!(out.exit_code, Some(i32::from(code)));
            assert_eq!(out.stdout, "x");
            assert_eq!(out.stderr, "");
        }
    }

    #[test]
    fn missing_exit_frame_leaves_exit_code_unknown() {
        let out = decode(&[b"\x01partial"]);
        assert_eq!(out.exit_code, None);
        assert_eq!(out.stdout, "partial");
        let out = decode(&[b"\x01partial\x03"]);
        assert_eq!(out.exit_code, None, "exit marker without its code byte");
    }

    #[test]
    fn unframed_leading_bytes_count_as_stdout() {
        let out = decode(&[b"plain text", b"\x03\x00"]);
        assert_eq!(out.stdout, "plain text");
        assert_eq!(out.exit_code, Some(0));
    }

    #[test]
    fn output_past_the_limit_is_dropped_with_a_note() {
        let mut decoder = FrameDecoder::with_limit(4);
        decoder.push(b"\x01abcdef\x02xy\x03\x00");
        let out = decoder.take_output();
        assert_eq!(out.stdout, "abcd");
        assert!(
            out.stderr
                .starts_with("xy\n[roder] stdout truncated: 2 bytes")
        );
    }

    #[test]
    fn decodes_json_bodies_with_either_exit_key() {
        let out = decode_json_body(br#"{"exit_code":3,"stdout":"a","stderr":"b"}"#).unwrap();
        assert_eq!(
            out,
            ExecOutput {
                stdout: "a".into(),
                stderr: "b".into(),
                exit_code: Some(3)
            }
        );
        let out = decode_json_body(br#"{"code":0,"stdout":"x"}"#).unwrap();
        assert_eq!(out.exit_code, Some(0));
        assert_eq!(out.stderr, "");
        assert!(decode_json_body(b"not json").is_err());
    }

    /// A reference decoder: the documented rule, byte by byte.
    fn model(body: &[u8]) -> (Vec<u8>, Vec<u8>, Option<u8>) {
        let (mut out, mut err, mut code) = (Vec::new(), Vec::new(), None);
        let mut stream = STDOUT;
        let mut bytes = body.iter();
        while let Some(&b) = bytes.next() {
            match b {
                STDOUT | STDERR => stream = b,
                EXIT => {
                    if let Some(&c) = bytes.next() {
                        code = Some(c);
                    }
                }
                other if stream == STDOUT => out.push(other),
                other => err.push(other),
            }
        }
        (out, err, code)
    }

    proptest! {
        #[test]
        fn any_bytes_cut_anywhere_decode_as_the_model_says(
            body in proptest::collection::vec(any::<u8>(), 0..512),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
            points.sort_unstable();
            let mut decoder = FrameDecoder::default();
            let mut start = 0;
            for point in points {
                decoder.push(&body[start..point]);
                start = point;
            }
            decoder.push(&body[start..]);
            let out = decoder.take_output();
            let (stdout, stderr, code) = model(&body);
            prop_assert_eq!(out.stdout, String::from_utf8_lossy(&stdout).into_owned());
            prop_assert_eq!(out.stderr, String::from_utf8_lossy(&stderr).into_owned());
            prop_assert_eq!(out.exit_code, code.map(i32::from));
        }

        #[test]
        fn the_limit_holds_for_any_bytes(
            body in proptest::collection::vec(any::<u8>(), 0..256),
            limit in 0usize..32,
        ) {
            let mut decoder = FrameDecoder::with_limit(limit);
            decoder.push(&body);
            let (stdout, _, _) = model(&body);
            let out = decoder.take_output();
            let kept = stdout.len().min(limit);
            prop_assert_eq!(out.stdout, String::from_utf8_lossy(&stdout[..kept]).into_owned());
            prop_assert_eq!(out.stderr.contains("stdout truncated"), stdout.len() > limit);
        }

        #[test]
        fn json_bodies_of_any_bytes_decode_or_err(body in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode_json_body(&body);
        }
    }

    #[test]
    fn notes_start_on_their_own_line() {
        let mut s = String::from("partial");
        push_note(&mut s, "timed out");
        assert_eq!(s, "partial\n[roder] timed out\n");
    }
}
