//! `events.jsonl`: the append-only log, one compact JSON envelope per line.
//!
//! Crash tolerance rests on two rules. Loading skips any line that does not
//! parse (a torn tail from a crash mid-write). Appending first checks that
//! the file ends with `\n` and, if not, starts with one, so a torn tail stays
//! a line of its own and the new events are never glued onto it.
//! Blocking: call from `spawn_blocking`.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use roder_api::events::EventEnvelope;

/// Serialises events as lines. Compact JSON escapes newlines inside
/// strings, so each envelope is exactly one line.
pub(crate) fn encode(events: &[EventEnvelope]) -> serde_json::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(events.len() * 256);
    for event in events {
        serde_json::to_writer(&mut bytes, event)?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// Appends encoded lines with a single write, creating the file if needed.
pub(crate) fn append(path: &Path, lines: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
    let len = file.metadata()?.len();
    let mut last = [0u8; 1];
    let torn_tail = len > 0 && {
        file.read_exact_at(&mut last, len - 1)?;
        last[0] != b'\n'
    };
    if torn_tail {
        let mut fresh = Vec::with_capacity(lines.len() + 1);
        fresh.push(b'\n');
        fresh.extend_from_slice(lines);
        file.write_all(&fresh)
    } else {
        file.write_all(lines)
    }
}

/// Reads the whole log in one go; a missing file is an empty log.
pub(crate) fn read(path: &Path, after_seq: u64) -> io::Result<Vec<EventEnvelope>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(parse(&bytes, after_seq)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

/// Envelopes with `seq > after_seq`, in file order, skipping blank lines
/// and lines that do not parse (torn by a crash, or an event type this
/// version does not know).
pub(crate) fn parse(bytes: &[u8], after_seq: u64) -> Vec<EventEnvelope> {
    bytes
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .filter_map(|line| serde_json::from_slice::<EventEnvelope>(line).ok())
        .filter(|envelope| envelope.seq > after_seq)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::events::{RoderEvent, TurnInterrupted};
    use time::OffsetDateTime;

    fn envelope(seq: u64) -> EventEnvelope {
        EventEnvelope {
            seq,
            timestamp: OffsetDateTime::UNIX_EPOCH,
            thread_id: "t".to_string(),
            turn_id: Some("u".to_string()),
            event: RoderEvent::TurnInterrupted(TurnInterrupted {
                thread_id: "t".to_string(),
                turn_id: "multi\nline".to_string(),
            }),
        }
    }

    #[test]
    fn each_envelope_is_one_line() {
        let bytes = encode(&[envelope(1), envelope(2)]).unwrap();
        assert_eq!(bytes.iter().filter(|byte| **byte == b'\n').count(), 2);
        assert_eq!(parse(&bytes, 0), vec![envelope(1), envelope(2)]);
        assert_eq!(parse(&bytes, 1), vec![envelope(2)]);
    }

    #[test]
    fn parse_skips_torn_and_blank_lines() {
        let mut bytes = encode(&[envelope(1)]).unwrap();
        bytes.extend_from_slice(b"{\"seq\":2,\"timest\n\n  \n");
        bytes.extend_from_slice(&encode(&[envelope(3)]).unwrap());
        bytes.extend_from_slice(b"{\"seq\":4");
        assert_eq!(parse(&bytes, 0), vec![envelope(1), envelope(3)]);
    }

    #[test]
    fn append_after_a_torn_tail_starts_a_fresh_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        append(&path, &encode(&[envelope(1)]).unwrap()).unwrap();
        append(&path, b"{\"seq\":2,\"tor").unwrap();
        append(&path, &encode(&[envelope(3)]).unwrap()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("{\"seq\":2,\"tor\n{"), "{text}");
        assert_eq!(read(&path, 0).unwrap(), vec![envelope(1), envelope(3)]);
    }

    #[test]
    fn missing_log_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            read(&dir.path().join("events.jsonl"), 0)
                .unwrap()
                .is_empty()
        );
    }
}
