//! A thread's turns as rollback and fork see them, replayed from its log:
//! which turns are in effect (a rollback undoes turns, a fork starts after
//! its source's), the checkpoint each took at its start, and the
//! transcript the model saw just before each began.
//!
//! Turns are numbered from 1 in the order they are in effect; "turn N" is
//! the state at the end of turn N, which is the checkpoint taken when turn
//! N+1 started (turn 0: before the first turn). A fork made at its source's
//! turn N numbers its own turns from N+1.

use roder_api::checkpoint::WorkspaceCheckpoint;
use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::transcript::TranscriptItem;

use crate::runtime::Runtime;
use crate::threads::ThreadState;

/// A turn a thread can go back to (or be forked at).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewindTarget {
    /// Going back here keeps turns `1..=turn` (0: none).
    pub turn: u32,
    /// The id of turn `turn`, when the thread ran it itself.
    pub turn_id: Option<String>,
    /// Its user message.
    pub message: Option<String>,
    /// What the workspace is put back to: the checkpoint taken when turn
    /// `turn + 1` started.
    pub checkpoint: WorkspaceCheckpoint,
}

/// One turn in effect.
#[derive(Debug, Clone)]
pub(crate) struct LoggedTurn {
    pub turn_id: String,
    pub message: String,
    /// The seq of its `TurnStarted`: the transcript before it is that turn's
    /// starting point.
    pub started_seq: u64,
    pub checkpoint: Option<WorkspaceCheckpoint>,
}

/// The turns in effect after a whole log.
#[derive(Debug, Clone, Default)]
pub(crate) struct TurnLog {
    /// Turns inherited from a fork's source.
    pub base: u32,
    pub turns: Vec<LoggedTurn>,
}

impl TurnLog {
    pub fn replay(events: &[EventEnvelope]) -> Self {
        let mut log = TurnLog::default();
        for envelope in events {
            match &envelope.event {
                RoderEvent::ThreadForked(forked) => {
                    log.base = forked.at_turn;
                    log.turns.clear();
                }
                RoderEvent::TurnStarted(started) => log.turns.push(LoggedTurn {
                    turn_id: started.turn_id.clone(),
                    message: started.message.clone(),
                    started_seq: envelope.seq,
                    checkpoint: None,
                }),
                RoderEvent::WorkspaceCheckpointed(taken) => {
                    if let Some(turn) = log
                        .turns
                        .iter_mut()
                        .rev()
                        .find(|turn| turn.turn_id == taken.turn_id)
                    {
                        turn.checkpoint = Some(taken.checkpoint.clone());
                    }
                }
                RoderEvent::ThreadRolledBack(rolled_back) => {
                    let keep = rolled_back.to_turn.saturating_sub(log.base) as usize;
                    log.turns.truncate(keep);
                }
                _ => {}
            }
        }
        log
    }

    /// The number of the last turn in effect.
    pub fn current(&self) -> u32 {
        self.base + self.turns.len() as u32
    }

    /// The turn that starts right after turn `turn`, if the thread ran it.
    pub fn turn_after(&self, thread_id: &str, turn: u32) -> anyhow::Result<&LoggedTurn> {
        if turn < self.base {
            anyhow::bail!(
                "thread \"{thread_id}\" is a fork made at turn {}: it cannot go back before \
                 that turn (roll back or fork its source thread instead)",
                self.base
            );
        }
        let current = self.current();
        self.turns.get((turn - self.base) as usize).ok_or_else(|| {
            anyhow::anyhow!(
                "thread \"{thread_id}\" is at turn {current}: there is no turn after turn {turn} \
                 to undo (turns run: {current})"
            )
        })
    }

    pub fn targets(&self) -> Vec<RewindTarget> {
        self.turns
            .iter()
            .enumerate()
            .filter_map(|(index, next)| {
                let kept = index.checked_sub(1).map(|kept| &self.turns[kept]);
                Some(RewindTarget {
                    turn: self.base + index as u32,
                    turn_id: kept.map(|turn| turn.turn_id.clone()),
                    message: kept.map(|turn| turn.message.clone()),
                    checkpoint: next.checkpoint.clone()?,
                })
            })
            .collect()
    }
}

/// The transcript as rebuilt from the events before `seq`.
pub(crate) fn transcript_before(events: &[EventEnvelope], seq: u64) -> Vec<TranscriptItem> {
    let mut transcript = Vec::new();
    for envelope in events.iter().take_while(|envelope| envelope.seq < seq) {
        roder_api::transcript::apply_event(&mut transcript, &envelope.event);
    }
    transcript
}

/// A thread claimed for an operation that is not a turn (a rollback),
/// released on drop.
pub(crate) struct ThreadClaim<'a> {
    pub thread: &'a ThreadState,
    pub id: String,
}

impl Drop for ThreadClaim<'_> {
    fn drop(&mut self) {
        self.thread.release(&self.id);
    }
}

/// The rewind targets of a thread whose persisted log is `events` (what
/// [`Runtime::rewind_targets`] answers), for readers of a store that run no
/// runtime.
///
/// ```
/// assert!(roder_core::rewind_targets_of(&[]).is_empty());
/// ```
pub fn rewind_targets_of(events: &[EventEnvelope]) -> Vec<RewindTarget> {
    TurnLog::replay(events).targets()
}

impl Runtime {
    /// The turns a thread can go back to (`rollback_thread`) or be forked
    /// at (`fork_thread`), oldest first: each turn whose next turn took a
    /// checkpoint. The thread's current turn is not listed (a fork there
    /// takes a checkpoint of the workspace as it is now).
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// for target in runtime.rewind_targets("t").await? {
    ///     println!("turn {}: {:?}", target.turn, target.message);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn rewind_targets(&self, thread_id: &str) -> anyhow::Result<Vec<RewindTarget>> {
        self.thread_metadata(thread_id).await?;
        let events = self.store.load_events(thread_id, 0).await?;
        Ok(TurnLog::replay(&events).targets())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::checkpoint::{ThreadForked, ThreadRolledBack, WorkspaceCheckpointed};
    use roder_api::events::{TranscriptItemAppended, TurnStarted};
    use time::OffsetDateTime;

    fn envelope(seq: u64, event: RoderEvent) -> EventEnvelope {
        EventEnvelope {
            seq,
            timestamp: OffsetDateTime::UNIX_EPOCH,
            thread_id: "t".into(),
            turn_id: None,
            event,
        }
    }

    fn checkpoint(id: &str) -> WorkspaceCheckpoint {
        WorkspaceCheckpoint {
            checkpointer: "git".into(),
            id: id.into(),
            reference: None,
            metadata: serde_json::Value::Null,
        }
    }

    /// TurnStarted, the user message, the checkpoint: three events a turn.
    fn turn(events: &mut Vec<EventEnvelope>, id: &str, checkpointed: bool) {
        let mut push = |event| {
            let seq = events.len() as u64 + 1;
            events.push(envelope(seq, event));
        };
        push(RoderEvent::TurnStarted(TurnStarted {
            thread_id: "t".into(),
            turn_id: id.into(),
            message: format!("message {id}"),
            provider: "mock".into(),
            model: "mock".into(),
        }));
        push(RoderEvent::TranscriptItemAppended(TranscriptItemAppended {
            thread_id: "t".into(),
            turn_id: id.into(),
            item: TranscriptItem::UserMessage {
                text: format!("message {id}"),
                images: vec![],
            },
        }));
        if checkpointed {
            push(RoderEvent::WorkspaceCheckpointed(WorkspaceCheckpointed {
                thread_id: "t".into(),
                turn_id: id.into(),
                checkpoint: checkpoint(&format!("c-{id}")),
            }));
        }
    }

    #[test]
    fn targets_follow_checkpoints_and_a_rollback_renumbers_later_turns() {
        let mut events = Vec::new();
        turn(&mut events, "a", true);
        turn(&mut events, "b", false);
        turn(&mut events, "c", true);
        let log = TurnLog::replay(&events);
        assert_eq!(log.current(), 3);
        let targets = log.targets();
        let turns: Vec<u32> = targets.iter().map(|target| target.turn).collect();
        assert_eq!(
            turns,
            vec![0, 2],
            "turn b took no checkpoint: no way back to turn 1"
        );
        assert_eq!(targets[1].turn_id.as_deref(), Some("b"));
        assert_eq!(targets[1].checkpoint.id, "c-c");

        let seq = events.len() as u64 + 1;
        events.push(envelope(
            seq,
            RoderEvent::ThreadRolledBack(ThreadRolledBack {
                thread_id: "t".into(),
                to_turn: 1,
                rolled_back_turns: vec!["b".into(), "c".into()],
                checkpoint: checkpoint("c-b"),
                transcript: transcript_before(&events, log.turns[1].started_seq),
            }),
        ));
        turn(&mut events, "d", true);
        let log = TurnLog::replay(&events);
        assert_eq!(log.current(), 2);
        let ids: Vec<&str> = log.turns.iter().map(|turn| turn.turn_id.as_str()).collect();
        assert_eq!(ids, vec!["a", "d"]);
        let before_d = transcript_before(&events, log.turns[1].started_seq);
        assert_eq!(
            before_d,
            vec![TranscriptItem::UserMessage {
                text: "message a".into(),
                images: vec![]
            }],
            "the rolled-back turns are out of the transcript"
        );
        let error = log.turn_after("t", 2).unwrap_err().to_string();
        assert!(error.contains("is at turn 2"), "{error}");
    }

    #[test]
    fn a_fork_numbers_its_turns_after_its_source_and_cannot_go_back_before_it() {
        let mut events = vec![envelope(
            1,
            RoderEvent::ThreadForked(ThreadForked {
                thread_id: "f".into(),
                source_thread_id: "t".into(),
                at_turn: 2,
                checkpoint: checkpoint("c"),
                transcript: vec![],
            }),
        )];
        turn(&mut events, "x", true);
        let log = TurnLog::replay(&events);
        assert_eq!(log.current(), 3);
        assert_eq!(log.targets()[0].turn, 2);
        assert_eq!(log.turn_after("f", 2).unwrap().turn_id, "x");
        let error = log.turn_after("f", 1).unwrap_err().to_string();
        assert!(error.contains("fork made at turn 2"), "{error}");
    }
}
