//! Finding where the events after a seq start in `events.jsonl`, without
//! reading what comes before: a binary search over byte offsets.
//!
//! It rests on the log's numbering rule: appends are refused unless they
//! continue the log, so the lines' seqs grow strictly with their offsets
//! (torn and unknown lines aside, which only ever make the search stop
//! earlier). Every envelope line starts `{"seq":N,` — `seq` is the first
//! field of `EventEnvelope` — so a probe reads a few bytes of one line.
//!
//! The offset returned is a line start at or before the first line with a
//! seq above the one asked for, within [`SCAN_WINDOW`] of it when the log is
//! well formed; the caller scans on from there and filters by seq as it
//! would from the start. Blocking: call from `spawn_blocking`.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Below this span the search stops and the caller scans: a sequential read
/// of this much is cheaper than more probes.
const SCAN_WINDOW: u64 = 64 * 1024;

/// Bytes read per step when looking for the end of a line.
const CHUNK: usize = 8 * 1024;

/// A line start (0, or just after a `\n`) at or before the first line of
/// `file` (of `len` bytes) whose seq is above `after_seq`.
pub(crate) fn offset_after(file: &File, len: u64, after_seq: u64) -> io::Result<u64> {
    if after_seq == 0 {
        return Ok(0);
    }
    // `low` is always a line start whose line (if any) has seq <= after_seq,
    // or 0; the boundary lies in [low, high).
    let (mut low, mut high) = (0_u64, len);
    while high.saturating_sub(low) > SCAN_WINDOW {
        let middle = low + (high - low) / 2;
        let Some(start) = next_line_start(file, middle, high)? else {
            high = middle;
            continue;
        };
        match line_seq(file, start)? {
            Some(seq) if seq <= after_seq => low = start,
            // Above: the boundary is at or before this line. Unknown (a torn
            // or foreign line): stop looking right of it, which only costs
            // a longer scan from `low`.
            _ => high = start,
        }
    }
    Ok(low)
}

/// The offset just after the first `\n` at or after `from - 1` (so `from`
/// itself when it follows a newline), if one is before `limit`.
fn next_line_start(file: &File, from: u64, limit: u64) -> io::Result<Option<u64>> {
    let mut at = from.saturating_sub(1);
    let mut buffer = vec![0_u8; CHUNK];
    while at < limit {
        let read = file.read_at(&mut buffer, at)?;
        if read == 0 {
            return Ok(None);
        }
        let window = buffer.get(..read).unwrap_or_default();
        if let Some(index) = window.iter().position(|byte| *byte == b'\n') {
            let start = at + index as u64 + 1;
            return Ok((start < limit).then_some(start));
        }
        at += read as u64;
    }
    Ok(None)
}

/// The seq of the line starting at `start`, when it begins `{"seq":N`.
fn line_seq(file: &File, start: u64) -> io::Result<Option<u64>> {
    let mut head = [0_u8; 32];
    let read = file.read_at(&mut head, start)?;
    Ok(parse_seq(head.get(..read).unwrap_or_default()))
}

/// `N` from a line that begins `{"seq":N` followed by a non-digit.
pub(crate) fn parse_seq(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"{\"seq\":")?;
    let digits = rest.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if digits == 0 || digits == rest.len() {
        return None;
    }
    std::str::from_utf8(rest.get(..digits)?).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    fn log_with(lines: &[Vec<u8>]) -> (tempfile::NamedTempFile, u64) {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        for line in lines {
            file.write_all(line).unwrap();
            file.write_all(b"\n").unwrap();
        }
        let len = file.as_file().metadata().unwrap().len();
        (file, len)
    }

    fn line(seq: u64, pad: usize) -> Vec<u8> {
        format!("{{\"seq\":{seq},\"pad\":\"{}\"}}", "x".repeat(pad)).into_bytes()
    }

    /// The first line with a seq above `after`, found by reading it all.
    fn first_above(lines: &[Vec<u8>], after: u64) -> Option<u64> {
        let mut offset = 0_u64;
        for line in lines {
            if parse_seq(line).is_some_and(|seq| seq > after) {
                return Some(offset);
            }
            offset += line.len() as u64 + 1;
        }
        None
    }

    #[test]
    fn seqs_are_read_from_the_line_head_only() {
        assert_eq!(parse_seq(b"{\"seq\":42,\"x\":1}"), Some(42));
        assert_eq!(parse_seq(b"{\"seq\":42"), None, "cut: maybe more digits");
        assert_eq!(parse_seq(b"{\"seq\":,"), None);
        assert_eq!(parse_seq(b"{\"seq\":99999999999999999999999,"), None);
        assert_eq!(parse_seq(b"{\"timestamp\":1,\"seq\":4,"), None);
        assert_eq!(parse_seq(b""), None);
    }

    #[test]
    fn a_long_log_is_searched_not_read() {
        let lines: Vec<Vec<u8>> = (1..=20_000).map(|seq| line(seq, 200)).collect();
        let (file, len) = log_with(&lines);
        for after in [1, 2, 777, 10_000, 19_999, 20_000, 30_000] {
            let offset = offset_after(file.as_file(), len, after).unwrap();
            let boundary = first_above(&lines, after).unwrap_or(len);
            assert!(offset <= boundary, "after {after}: {offset} > {boundary}");
            assert!(
                boundary - offset <= SCAN_WINDOW + 300,
                "after {after}: scans {} bytes",
                boundary - offset
            );
        }
    }

    proptest! {
        /// Whatever the log holds (torn lines, blank lines, huge lines), the
        /// offset is a line start at or before every line above the seq.
        #[test]
        fn the_offset_never_skips_a_later_event(
            pads in proptest::collection::vec(0_usize..40_000, 1..60),
            torn in proptest::collection::vec(any::<bool>(), 60),
            after in 0_u64..70,
        ) {
            let mut lines = Vec::new();
            for (index, pad) in pads.iter().enumerate() {
                if torn.get(index).copied().unwrap_or(false) {
                    lines.push(b"{\"seq\":".to_vec());
                }
                lines.push(line(index as u64 + 1, *pad));
            }
            let (file, len) = log_with(&lines);
            let offset = offset_after(file.as_file(), len, after).unwrap();
            let boundary = first_above(&lines, after).unwrap_or(len);
            prop_assert!(offset <= boundary);
            let bytes = std::fs::read(file.path()).unwrap();
            prop_assert!(offset == 0 || bytes.get(offset as usize - 1) == Some(&b'\n'));
        }
    }
}
