//! `events.jsonl`: the append-only log, one compact JSON envelope per line.
//!
//! Crash tolerance rests on two rules. Loading skips any line that does not
//! parse (a torn tail from a crash mid-write). Appending first checks that
//! the file ends with `\n` and, if not, starts with one, so a torn tail stays
//! a line of its own and the new events are never glued onto it.
//!
//! Numbering rests on a third: an append whose first event is not the next
//! `seq` on disk is refused whole (see [`append`]).
//! Blocking: call from `spawn_blocking`.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::path::Path;

use anyhow::{Context, bail};
use roder_api::events::EventEnvelope;

use crate::tail;

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

/// One append: encoded lines holding the events `first_seq..=last_seq`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch<'a> {
    pub first_seq: u64,
    pub last_seq: u64,
    pub lines: &'a [u8],
}

/// Appends a batch with a single write, creating the file if needed, if and
/// only if its first event is the next `seq` on disk; otherwise writes
/// nothing and says where the log ends.
///
/// The check and the write happen under an exclusive lock on the log file,
/// so two processes appending at once are serialised and the second one is
/// refused instead of writing a `seq` twice. The lock is held for one write
/// (the thread's writer lease is the long-lived guard) and released when the
/// file is closed.
pub(crate) fn append(
    path: &Path,
    thread_id: &str,
    batch: Batch<'_>,
    sync: bool,
) -> anyhow::Result<()> {
    let created = !path.exists();
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)
        .map_err(|error| crate::disk::explain(error, path, "cannot open for appending"))?;
    file.lock()
        .with_context(|| format!("cannot lock `{}` for appending", path.display()))?;
    let metadata = file
        .metadata()
        .with_context(|| format!("cannot stat `{}`", path.display()))?;
    let tail = match tail::cached(path, &metadata) {
        Some(tail) => tail,
        None => {
            let tail = tail::scan(&file, metadata.len())
                .with_context(|| format!("cannot read the end of `{}`", path.display()))?;
            if tail.ends_with_newline {
                tail::remember(path, &metadata, metadata.len(), tail.last_seq);
            }
            tail
        }
    };
    if Some(batch.first_seq) != tail.last_seq.checked_add(1) {
        bail!(
            "append of seq {} to thread \"{thread_id}\" refused: its log `{}` ends at seq {}, so the next seq is {}; another writer may be appending to this thread (take its writer lease before writing)",
            batch.first_seq,
            path.display(),
            tail.last_seq,
            tail.last_seq.saturating_add(1),
        );
    }
    let written = write_lines(&file, batch.lines, !tail.ends_with_newline).and_then(|bytes| {
        sync.then(|| crate::sync::sync(&file, path, created))
            .transpose()
            .map(|_| bytes)
    });
    match written {
        Ok(bytes) => {
            tail::remember(path, &metadata, metadata.len() + bytes, batch.last_seq);
            Ok(())
        }
        Err(error) => {
            // A write cut short (a full disk) may have left part of the
            // batch, even whole lines of it, which would count as written
            // and make the retry of the same seqs a refusal. The log goes
            // back to its length before this append: shrinking needs no
            // space, so it ends at the last complete event again.
            let restored = file.set_len(metadata.len());
            tail::forget(path);
            let error = crate::disk::explain(error, path, "cannot append to");
            match restored {
                Ok(()) => Err(error),
                Err(truncate) => Err(error.context(format!(
                    "and the part written could not be removed ({truncate}): the log may end with a partial batch"
                ))),
            }
        }
    }
}

/// Writes `lines` in one write, after a `\n` when the file ends with a torn
/// line (so the fragment stays a line of its own). Returns the bytes written.
fn write_lines(mut file: &File, lines: &[u8], after_torn_tail: bool) -> io::Result<u64> {
    if after_torn_tail {
        let mut fresh = Vec::with_capacity(lines.len() + 1);
        fresh.push(b'\n');
        fresh.extend_from_slice(lines);
        file.write_all(&fresh)?;
        Ok(fresh.len() as u64)
    } else {
        file.write_all(lines)?;
        Ok(lines.len() as u64)
    }
}

/// The `seq` of the last event on disk (0 for a missing or empty log), read
/// under a shared lock so no append is half done.
pub(crate) fn last_seq(path: &Path) -> anyhow::Result<u64> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(error) => {
            return Err(error).with_context(|| format!("cannot open `{}`", path.display()));
        }
    };
    file.lock_shared()
        .with_context(|| format!("cannot lock `{}` for reading", path.display()))?;
    let metadata = file
        .metadata()
        .with_context(|| format!("cannot stat `{}`", path.display()))?;
    if let Some(tail) = tail::cached(path, &metadata) {
        return Ok(tail.last_seq);
    }
    let tail = tail::scan(&file, metadata.len())
        .with_context(|| format!("cannot read the end of `{}`", path.display()))?;
    if tail.ends_with_newline {
        tail::remember(path, &metadata, metadata.len(), tail.last_seq);
    }
    Ok(tail.last_seq)
}

/// Reads the log from the first line that can hold a seq above `after_seq`
/// (found by [`crate::seek`]) to its end, in one go; a missing file is an
/// empty log.
pub(crate) fn read(path: &Path, after_seq: u64) -> io::Result<Vec<EventEnvelope>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let len = file.metadata()?.len();
    let offset = crate::seek::offset_after(&file, len, after_seq)?;
    file.seek(io::SeekFrom::Start(offset))?;
    let mut bytes = Vec::with_capacity(usize::try_from(len - offset).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(parse(&bytes, after_seq))
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

    fn append_seqs(path: &Path, seqs: std::ops::RangeInclusive<u64>) -> anyhow::Result<()> {
        let events: Vec<EventEnvelope> = seqs.clone().map(envelope).collect();
        let lines = encode(&events).unwrap();
        append(
            path,
            "t",
            Batch {
                first_seq: *seqs.start(),
                last_seq: *seqs.end(),
                lines: &lines,
            },
            false,
        )
    }

    /// Appends bytes the way another process would: past this process's
    /// cache of the log's end.
    fn append_raw(path: &Path, bytes: &[u8]) {
        let mut file = OpenOptions::new().append(true).open(path).unwrap();
        file.write_all(bytes).unwrap();
    }

    #[test]
    fn append_after_a_torn_tail_starts_a_fresh_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        append_seqs(&path, 1..=1).unwrap();
        append_raw(&path, b"{\"seq\":2,\"tor");
        append_seqs(&path, 2..=2).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("{\"seq\":2,\"tor\n{"), "{text}");
        assert_eq!(read(&path, 0).unwrap(), vec![envelope(1), envelope(2)]);
    }

    #[test]
    fn an_append_that_is_not_next_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let error = append_seqs(&path, 2..=3).unwrap_err().to_string();
        assert!(
            error.contains("append of seq 2 to thread \"t\" refused")
                && error.contains("ends at seq 0, so the next seq is 1"),
            "{error}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"");

        append_seqs(&path, 1..=2).unwrap();
        let before = std::fs::read(&path).unwrap();
        for seqs in [1..=1, 2..=3, 4..=4] {
            let error = append_seqs(&path, seqs.clone()).unwrap_err().to_string();
            assert!(
                error.contains(&format!("append of seq {} ", seqs.start()))
                    && error.contains("ends at seq 2, so the next seq is 3")
                    && error.contains("writer lease"),
                "{error}"
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
        append_seqs(&path, 3..=3).unwrap();
    }

    #[test]
    fn an_append_by_another_process_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        append_seqs(&path, 1..=1).unwrap();
        assert_eq!(last_seq(&path).unwrap(), 1);
        append_raw(&path, &encode(&[envelope(2)]).unwrap());
        assert_eq!(last_seq(&path).unwrap(), 2);
        let error = append_seqs(&path, 2..=2).unwrap_err().to_string();
        assert!(error.contains("ends at seq 2"), "{error}");
        append_seqs(&path, 3..=3).unwrap();
        let seqs: Vec<u64> = read(&path, 0).unwrap().iter().map(|e| e.seq).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
    }

    #[test]
    fn racing_appenders_never_write_a_seq_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let barrier = std::sync::Barrier::new(4);
        let accepted: u64 = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        barrier.wait();
                        (1..=200)
                            .filter(|seq| append_seqs(&path, *seq..=*seq).is_ok())
                            .count() as u64
                    })
                })
                .collect();
            racers.into_iter().map(|racer| racer.join().unwrap()).sum()
        });
        let seqs: Vec<u64> = read(&path, 0).unwrap().iter().map(|e| e.seq).collect();
        // Whoever wrote the last seq goes on to the next one, so every seq
        // is written, and each exactly once.
        assert_eq!(accepted, 200);
        assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    }

    #[test]
    fn last_seq_of_a_missing_log_is_zero() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(last_seq(&dir.path().join("events.jsonl")).unwrap(), 0);
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
