//! Re-chunks a response body so every chunk ends at a line break.
//!
//! The SSE parser (`eventsource-stream`) re-reads its whole pending line
//! each time a chunk arrives that does not finish it, so one long `data:`
//! line delivered in many network chunks (a 20 MB answer in a single delta)
//! costs time quadratic in its length. Handing it whole lines only keeps it
//! linear: this framer looks for a line break in the new bytes alone and
//! passes on everything up to the last one.
//!
//! Only `\n` ends a chunk (it also ends `\r\n`); a body that uses bare `\r`
//! line breaks is passed on at its end, which the parser still reads right.

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

/// `body` in chunks that each end with `\n`, except possibly the last.
pub(crate) fn whole_lines<S, E>(body: S) -> impl Stream<Item = Result<Bytes, E>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    futures::stream::unfold(
        (body, BytesMut::new(), false),
        |(mut body, mut pending, finished)| async move {
            if finished {
                return None;
            }
            loop {
                match body.next().await {
                    Some(Ok(chunk)) => {
                        let searched_from = pending.len();
                        pending.extend_from_slice(&chunk);
                        if let Some(at) = pending
                            .get(searched_from..)
                            .and_then(|new| new.iter().rposition(|byte| *byte == b'\n'))
                        {
                            let lines = pending.split_to(searched_from + at + 1).freeze();
                            return Some((Ok(lines), (body, pending, false)));
                        }
                    }
                    Some(Err(error)) => return Some((Err(error), (body, pending, true))),
                    None if pending.is_empty() => return None,
                    None => {
                        let rest = pending.split().freeze();
                        return Some((Ok(rest), (body, pending, true)));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(chunks: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let body = futures::stream::iter(
            chunks
                .into_iter()
                .map(|chunk| Ok::<_, std::convert::Infallible>(Bytes::from(chunk))),
        );
        futures::executor::block_on(whole_lines(body).collect::<Vec<_>>())
            .into_iter()
            .filter_map(Result::ok)
            .map(|chunk| chunk.to_vec())
            .collect()
    }

    #[test]
    fn a_line_split_across_chunks_arrives_whole() {
        let framed = frame(vec![
            b"data: hel".to_vec(),
            b"lo\n\nda".to_vec(),
            b"ta: x".to_vec(),
        ]);
        assert_eq!(
            framed,
            vec![b"data: hello\n\n".to_vec(), b"data: x".to_vec()]
        );
    }

    proptest! {
        #[test]
        fn bytes_are_kept_in_order_and_chunks_end_at_line_breaks(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..20)
        ) {
            let expected: Vec<u8> = chunks.concat();
            let framed = frame(chunks);
            prop_assert_eq!(framed.concat(), expected);
            if let Some((_, whole)) = framed.split_last() {
                for chunk in whole {
                    prop_assert_eq!(chunk.last(), Some(&b'\n'));
                }
            }
        }
    }
}
