//! One bounded page of `events.jsonl`, read line by line from where the
//! page starts (found by [`crate::seek`], a binary search) and no further
//! than the page: any page of a 100,000-event thread costs what the page
//! holds, not the log. The few lines between the search's offset and the
//! page are only scanned for their `seq`. Torn and unknown lines are
//! skipped, as `event_log::parse` does. Blocking: call from `spawn_blocking`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek};
use std::path::Path;

use roder_api::events::EventEnvelope;
use roder_api::thread::EventsPage;

/// Just the `seq` of a line, to skip it without building the event.
#[derive(serde::Deserialize)]
struct SeqOnly {
    seq: u64,
}

pub(crate) fn read_page(
    path: &Path,
    after_seq: u64,
    max_items: usize,
    max_bytes: usize,
) -> io::Result<EventsPage> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(EventsPage::default()),
        Err(error) => return Err(error),
    };
    let len = file.metadata()?.len();
    let offset = crate::seek::offset_after(&file, len, after_seq)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    reader.seek(io::SeekFrom::Start(offset))?;
    let mut line = Vec::new();
    let mut page = EventsPage::default();
    let mut bytes = 0usize;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(page);
        }
        let Ok(head) = serde_json::from_slice::<SeqOnly>(&line) else {
            continue;
        };
        if head.seq <= after_seq {
            continue;
        }
        let Ok(envelope) = serde_json::from_slice::<EventEnvelope>(&line) else {
            continue;
        };
        let size = line.len();
        if !page.events.is_empty()
            && (page.events.len() >= max_items || bytes.saturating_add(size) > max_bytes)
        {
            page.more = true;
            return Ok(page);
        }
        bytes = bytes.saturating_add(size);
        page.events.push(envelope);
    }
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
            turn_id: None,
            event: RoderEvent::TurnInterrupted(TurnInterrupted {
                thread_id: "t".to_string(),
                turn_id: "u".to_string(),
            }),
        }
    }

    #[test]
    fn pages_are_bounded_by_items_and_bytes_and_skip_torn_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let events: Vec<EventEnvelope> = (1..=10).map(envelope).collect();
        let mut bytes = crate::event_log::encode(&events[..5]).unwrap();
        bytes.extend_from_slice(b"{\"seq\":6,\"torn\n");
        bytes.extend_from_slice(&crate::event_log::encode(&events[5..]).unwrap());
        std::fs::write(&path, &bytes).unwrap();
        let page = read_page(&path, 0, 3, usize::MAX).unwrap();
        assert_eq!(page.events, events[..3].to_vec());
        assert!(page.more);
        let page = read_page(&path, 8, 3, usize::MAX).unwrap();
        assert_eq!(page.events, events[8..].to_vec());
        assert!(!page.more);
        let line = crate::event_log::encode(&events[..1]).unwrap().len();
        let page = read_page(&path, 0, 100, line * 2).unwrap();
        assert_eq!(page.events.len(), 2);
        let page = read_page(&path, 0, 100, 1).unwrap();
        assert_eq!(page.events.len(), 1, "the first event always");
        let missing = read_page(&dir.path().join("none"), 0, 3, 100).unwrap();
        assert_eq!(missing, EventsPage::default());
    }
}
