//! Splitting a streamed NDJSON body into lines.
//!
//! Checkpoint and kill calls answer with `application/x-ndjson` streams whose
//! chunks need not end on a line boundary, so lines are reassembled here
//! before anything parses them.

/// Buffers bytes until a full line (ending in `\n`) is available.
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    /// Adds a chunk and returns every line it completed, without the newline
    /// (a trailing `\r` is dropped too). Blank lines are skipped. Any bytes
    /// are accepted; invalid UTF-8 becomes U+FFFD.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut lines = Vec::new();
        let Some(last_newline) = self.pending.iter().rposition(|b| *b == b'\n') else {
            return lines;
        };
        let rest = self.pending.split_off(last_newline + 1);
        let complete = std::mem::replace(&mut self.pending, rest);
        for line in complete.split(|b| *b == b'\n') {
            push_line(&mut lines, line);
        }
        lines
    }

    /// Returns the last line when the stream ended without a final newline.
    pub(crate) fn finish(&mut self) -> Vec<String> {
        let rest = std::mem::take(&mut self.pending);
        let mut lines = Vec::new();
        push_line(&mut lines, &rest);
        lines
    }
}

fn push_line(lines: &mut Vec<String>, raw: &[u8]) {
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches('\r');
    if !text.trim().is_empty() {
        lines.push(text.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reassembles_lines_split_across_chunks() {
        let body = b"{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}";
        for at in 0..=body.len() {
            let mut buffer = LineBuffer::default();
            let mut lines = buffer.push(&body[..at]);
            lines.extend(buffer.push(&body[at..]));
            lines.extend(buffer.finish());
            assert_eq!(
                lines,
                vec![r#"{"a":1}"#, r#"{"b":2}"#, r#"{"c":3}"#],
                "split at {at}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_bytes_give_the_same_lines_however_they_are_cut(
            body in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), any::<u8>()], 0..256),
            cut in any::<usize>(),
        ) {
            let whole = {
                let mut buffer = LineBuffer::default();
                let mut lines = buffer.push(&body);
                lines.extend(buffer.finish());
                lines
            };
            let at = cut % (body.len() + 1);
            let mut buffer = LineBuffer::default();
            let mut lines = buffer.push(&body[..at]);
            lines.extend(buffer.push(&body[at..]));
            lines.extend(buffer.finish());
            prop_assert_eq!(&lines, &whole);
            for line in &lines {
                prop_assert!(!line.contains('\n') && !line.trim().is_empty());
            }
        }
    }
}
