//! Newline-delimited framing for stdio (shared with `roder-acp`), bounded:
//! a line longer than the limit is skipped as it streams past instead of
//! being buffered whole.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What [`read_frame`] read.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One line, without its `\n` (or `\r\n`).
    Line(Vec<u8>),
    /// A line of this many bytes, over the limit, already skipped.
    TooLong(usize),
    Eof,
}

/// Reads the next line of at most `max` bytes. A last line without a
/// trailing newline still counts.
pub async fn read_frame<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> std::io::Result<Frame> {
    let mut line = Vec::new();
    let mut size = 0usize;
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            if size == 0 && !too_long {
                return Ok(Frame::Eof);
            }
            return Ok(finish(line, size, too_long, max));
        }
        let newline = available.iter().position(|byte| *byte == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        size += chunk.len();
        if !too_long {
            if size > max.saturating_add(1) {
                // Allow one byte over for a `\r` that will be stripped.
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = chunk.len() + usize::from(newline.is_some());
        reader.consume(consumed);
        if newline.is_some() {
            return Ok(finish(line, size, too_long, max));
        }
    }
}

fn finish(mut line: Vec<u8>, size: usize, too_long: bool, max: usize) -> Frame {
    if too_long {
        return Frame::TooLong(size);
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.len() > max {
        return Frame::TooLong(line.len());
    }
    Frame::Line(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::BufReader;

    async fn frames(input: &[u8], max: usize, buffer: usize) -> Vec<Frame> {
        let mut reader = BufReader::with_capacity(buffer, input);
        let mut frames = Vec::new();
        loop {
            match read_frame(&mut reader, max).await.unwrap() {
                Frame::Eof => return frames,
                frame => frames.push(frame),
            }
        }
    }

    #[tokio::test]
    async fn splits_lines_and_strips_carriage_returns() {
        let got = frames(b"a\r\nbc\nlast", 10, 2).await;
        assert_eq!(
            got,
            vec![
                Frame::Line(b"a".to_vec()),
                Frame::Line(b"bc".to_vec()),
                Frame::Line(b"last".to_vec())
            ]
        );
    }

    #[tokio::test]
    async fn skips_an_oversized_line_and_reads_on() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nok\n");
        let got = frames(&input, 10, 8).await;
        assert_eq!(got, vec![Frame::TooLong(100), Frame::Line(b"ok".to_vec())]);
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_fits() {
        let got = frames(b"0123456789\n01234567890\n", 10, 4).await;
        assert_eq!(
            got,
            vec![Frame::Line(b"0123456789".to_vec()), Frame::TooLong(11)]
        );
    }
}
