//! The end of a thread's `events.jsonl`: the `seq` of its last event.
//!
//! An append is refused unless its first event is the next `seq` on disk, so
//! each append must know where the log ends. Reading that from disk every
//! time would cost a read and a parse per event; instead the answer is
//! cached per log file in this process, together with the file's identity
//! (device, inode) and length, and trusted only while the file still has
//! exactly that identity and length. Appenders hold an exclusive lock on the
//! file while they check and write (see `event_log::append`), and the log
//! only grows, so an unchanged length means nobody appended since; any other
//! length (another process appended, the thread was deleted and re-created)
//! makes the next append re-read the tail. Blocking: call from
//! `spawn_blocking`.

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;

/// Where a log ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tail {
    /// `seq` of the last line that parses as an envelope's head; 0 when
    /// there is none.
    pub last_seq: u64,
    /// Whether the file is empty or ends with `\n` (otherwise its last line
    /// is torn and the next append starts a fresh line).
    pub ends_with_newline: bool,
}

/// First window read from the end of the file; grows fourfold while no
/// complete event line fits in it (a 20 MB message is one line).
const FIRST_WINDOW: u64 = 4096;

/// Only the `seq` of a line is needed. Parsing just this also counts lines
/// whose event type this version does not know: their `seq` is taken all the
/// same, and reusing it would duplicate it.
#[derive(Deserialize)]
struct Head {
    seq: u64,
}

/// Reads where the log open as `file` (of length `len`) ends, from disk.
pub(crate) fn scan(file: &File, len: u64) -> io::Result<Tail> {
    let ends_with_newline = len == 0 || {
        let mut last = [0u8; 1];
        file.read_exact_at(&mut last, len - 1)?;
        last == [b'\n']
    };
    let mut window = FIRST_WINDOW;
    loop {
        let start = len.saturating_sub(window);
        let size = usize::try_from(len - start).map_err(|_| {
            io::Error::new(
                io::ErrorKind::OutOfMemory,
                "log tail does not fit in memory",
            )
        })?;
        let mut bytes = vec![0u8; size];
        file.read_exact_at(&mut bytes, start)?;
        let lines: Vec<&[u8]> = bytes.split(|byte| *byte == b'\n').collect();
        // Unless the window starts at the file's start, its first piece may
        // be the cut-off end of a longer line: never parse it.
        let cut = usize::from(start > 0);
        let found = lines
            .iter()
            .skip(cut)
            .rev()
            .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
            .find_map(|line| serde_json::from_slice::<Head>(line).ok());
        if let Some(head) = found {
            return Ok(Tail {
                last_seq: head.seq,
                ends_with_newline,
            });
        }
        if start == 0 {
            return Ok(Tail {
                last_seq: 0,
                ends_with_newline,
            });
        }
        window = window.saturating_mul(4);
    }
}

/// What this process last saw at the end of one log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    dev: u64,
    ino: u64,
    len: u64,
    last_seq: u64,
}

fn seen() -> &'static Mutex<HashMap<PathBuf, Seen>> {
    static SEEN: OnceLock<Mutex<HashMap<PathBuf, Seen>>> = OnceLock::new();
    SEEN.get_or_init(Mutex::default)
}

fn with_seen<T>(work: impl FnOnce(&mut HashMap<PathBuf, Seen>) -> T) -> T {
    // A panic while holding the map cannot leave an entry half written (each
    // is replaced whole), so a poisoned lock is still usable.
    let mut map = seen()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    work(&mut map)
}

/// The cached tail of `path`, if the file (described by `metadata`, taken
/// under the append lock) is the one last seen and has not grown since. A
/// cached tail always ends with `\n`: it was recorded after a whole append.
pub(crate) fn cached(path: &Path, metadata: &Metadata) -> Option<Tail> {
    with_seen(|map| {
        map.get(path)
            .filter(|seen| {
                seen.dev == metadata.dev()
                    && seen.ino == metadata.ino()
                    && seen.len == metadata.len()
            })
            .map(|seen| Tail {
                last_seq: seen.last_seq,
                ends_with_newline: true,
            })
    })
}

/// Records that `path` (the file described by `metadata`) is now `len`
/// bytes long and ends, after a whole line, at `last_seq`.
pub(crate) fn remember(path: &Path, metadata: &Metadata, len: u64, last_seq: u64) {
    let entry = Seen {
        dev: metadata.dev(),
        ino: metadata.ino(),
        len,
        last_seq,
    };
    with_seen(|map| match map.get_mut(path) {
        Some(seen) => *seen = entry,
        None => {
            map.insert(path.to_path_buf(), entry);
        }
    });
}

/// Drops what is known about `path` (after a failed write, whose effect on
/// the file is unknown, or a delete).
pub(crate) fn forget(path: &Path) {
    with_seen(|map| map.remove(path));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scan_bytes(bytes: &[u8]) -> Tail {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, bytes).unwrap();
        let file = File::open(&path).unwrap();
        scan(&file, bytes.len() as u64).unwrap()
    }

    fn tail(last_seq: u64, ends_with_newline: bool) -> Tail {
        Tail {
            last_seq,
            ends_with_newline,
        }
    }

    #[test]
    fn empty_log_ends_at_zero() {
        assert_eq!(scan_bytes(b""), tail(0, true));
        assert_eq!(scan_bytes(b"\n\n  \n"), tail(0, true));
    }

    #[test]
    fn finds_the_last_complete_line() {
        assert_eq!(
            scan_bytes(b"{\"seq\":1,\"x\":1}\n{\"seq\":2,\"x\":2}\n"),
            tail(2, true)
        );
    }

    #[test]
    fn skips_a_torn_tail_and_reports_it() {
        assert_eq!(
            scan_bytes(b"{\"seq\":1}\n{\"seq\":2}\n{\"seq\":3,\"ev"),
            tail(2, false)
        );
    }

    #[test]
    fn counts_lines_of_unknown_event_types() {
        assert_eq!(
            scan_bytes(b"{\"seq\":1}\n{\"seq\":2,\"event\":{\"type\":\"from_the_future\"}}\n"),
            tail(2, true)
        );
    }

    #[test]
    fn a_huge_last_line_is_read_whole() {
        let mut bytes = b"{\"seq\":1}\n".to_vec();
        let big = "y".repeat(1 << 20);
        bytes.extend_from_slice(format!("{{\"seq\":2,\"text\":\"{big}\"}}\n").as_bytes());
        assert_eq!(scan_bytes(&bytes), tail(2, true));
        // A window that starts inside line 2 first sees `yyy..."}`: it is
        // skipped, the window grows, and line 2 is read whole.
        bytes.extend_from_slice(b"{\"seq\":3,\"t\":\"torn");
        assert_eq!(scan_bytes(&bytes), tail(2, false));
    }

    #[test]
    fn cache_is_trusted_only_for_the_same_file_and_length() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let mut file = File::create(&path).unwrap();
        file.write_all(b"{\"seq\":1}\n").unwrap();
        let metadata = file.metadata().unwrap();
        assert_eq!(cached(&path, &metadata), None);
        remember(&path, &metadata, metadata.len(), 1);
        assert_eq!(cached(&path, &metadata), Some(tail(1, true)));

        file.write_all(b"{\"seq\":2}\n").unwrap();
        assert_eq!(cached(&path, &file.metadata().unwrap()), None);

        std::fs::remove_file(&path).unwrap();
        let recreated = File::create(&path).unwrap();
        recreated.set_len(metadata.len()).unwrap();
        assert_eq!(cached(&path, &recreated.metadata().unwrap()), None);

        remember(&path, &metadata, metadata.len(), 1);
        forget(&path);
        assert_eq!(cached(&path, &metadata), None);
    }

    proptest::proptest! {
        /// Any bytes at all (the file is not trusted): no panic, and a seq
        /// is only ever read from a line that holds one.
        #[test]
        fn scan_survives_arbitrary_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..6000)) {
            let found = scan_bytes(&bytes);
            proptest::prop_assert_eq!(found.ends_with_newline, bytes.is_empty() || bytes.last() == Some(&b'\n'));
        }

        /// Whole lines of any length (across window sizes), then maybe a
        /// torn one: the last whole line's seq.
        #[test]
        fn scan_finds_the_last_whole_line(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            lines in proptest::collection::vec((1u64..u64::MAX, 0usize..12_000), 1..6),
            torn in proptest::option::of(0usize..40),
        ) {
            // Junk first, on a line of its own (a damaged start of file).
            let mut bytes: Vec<u8> = junk.into_iter().filter(|byte| *byte != b'\n').collect();
            bytes.push(b'\n');
            let mut last = 0;
            for (seq, pad) in &lines {
                bytes.extend_from_slice(format!("{{\"seq\":{seq},\"pad\":\"{}\"}}\n", "p".repeat(*pad)).as_bytes());
                last = *seq;
            }
            if let Some(cut) = torn {
                let whole = format!("{{\"seq\":{},\"pad\":\"{}\"}}", last.wrapping_add(1), "q".repeat(30));
                bytes.extend_from_slice(whole.as_bytes().get(..cut.min(whole.len() - 1)).unwrap());
            }
            let found = scan_bytes(&bytes);
            proptest::prop_assert_eq!(found.last_seq, last);
        }
    }
}
