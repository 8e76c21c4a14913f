//! A bounded buffer for command output.
//!
//! A command can print gigabytes; the model needs the start (what ran) and the
//! end (how it finished). The buffer keeps the first and the last half of its
//! capacity and counts what it dropped in between, in constant memory.

use std::collections::VecDeque;

/// Command output kept by the command tools: 64 KiB, head and tail.
pub(crate) const DEFAULT_OUTPUT_CAP: usize = 64 * 1024;

#[derive(Debug)]
pub(crate) struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

/// The kept output, ready for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CapturedOutput {
    pub text: String,
    /// Bytes dropped from the middle (0 when nothing was cut).
    pub omitted_bytes: u64,
}

impl CappedOutput {
    pub fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < self.head_cap {
            let take = bytes.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() || self.tail_cap == 0 {
            return;
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail
                .extend(bytes[bytes.len() - self.tail_cap..].iter().copied());
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes.iter().copied());
    }

    pub fn finish(self) -> CapturedOutput {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let omitted_bytes = self.total - kept;
        let (front, back) = self.tail.as_slices();
        let mut tail = Vec::with_capacity(front.len() + back.len());
        tail.extend_from_slice(front);
        tail.extend_from_slice(back);
        let text = if omitted_bytes == 0 {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            String::from_utf8_lossy(&all).into_owned()
        } else {
            format!(
                "{}\n\n[... {omitted_bytes} bytes of output omitted ...]\n\n{}",
                String::from_utf8_lossy(&self.head),
                String::from_utf8_lossy(&tail)
            )
        };
        CapturedOutput {
            text,
            omitted_bytes,
        }
    }
}

/// Caps an output that arrived in one piece.
pub(crate) fn cap_output(bytes: &[u8], cap: usize) -> CapturedOutput {
    let mut buffer = CappedOutput::new(cap);
    buffer.push(bytes);
    buffer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut buffer = CappedOutput::new(16);
        buffer.push(b"hello ");
        buffer.push(b"world");
        let out = buffer.finish();
        assert_eq!(out.text, "hello world");
        assert_eq!(out.omitted_bytes, 0);
    }

    #[test]
    fn large_output_keeps_head_and_tail() {
        let mut buffer = CappedOutput::new(8);
        for chunk in [b"0123".as_slice(), b"4567", b"89ab", b"cdef"] {
            buffer.push(chunk);
        }
        let out = buffer.finish();
        assert_eq!(out.omitted_bytes, 8);
        assert!(out.text.starts_with("0123\n"), "{}", out.text);
        assert!(out.text.ends_with("\ncdef"), "{}", out.text);
        assert!(out.text.contains("8 bytes of output omitted"));
    }

    proptest! {
        #[test]
        fn keeps_exact_head_and_tail(
            chunks in proptest::collection::vec(proptest::collection::vec(b'a'..=b'z', 0..40), 0..20),
            cap in 2usize..64,
        ) {
            let all: Vec<u8> = chunks.concat();
            let mut buffer = CappedOutput::new(cap);
            for chunk in &chunks {
                buffer.push(chunk);
            }
            let out = buffer.finish();
            let text = String::from_utf8(all.clone()).unwrap();
            if all.len() <= cap {
                prop_assert_eq!(out.text, text);
                prop_assert_eq!(out.omitted_bytes, 0);
            } else {
                let head = &text[..cap / 2];
                let tail = &text[text.len() - (cap - cap / 2)..];
                prop_assert!(out.text.starts_with(head));
                prop_assert!(out.text.ends_with(tail));
                prop_assert_eq!(out.omitted_bytes, (all.len() - cap) as u64);
            }
        }
    }
}
