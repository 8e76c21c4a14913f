//! Rollback: [`Runtime::rollback_thread`] puts a thread back to the end of
//! one of its turns, workspace included.
//!
//! It is a write like a turn: refused while a turn runs (here, or in
//! another process through the writer lease). The workspace is restored
//! first, from the checkpoint taken when the next turn started; then one
//! `ThreadRolledBack` event carries the transcript through that turn, so
//! later model requests leave the undone turns out while the log keeps
//! them.

use roder_api::checkpoint::ThreadRolledBack;
use roder_api::events::RoderEvent;

use crate::rewind::{ThreadClaim, TurnLog, transcript_before};
use crate::runtime::Runtime;

impl Runtime {
    /// Rolls `thread_id` back to the end of turn `to_turn` (0: before its
    /// first turn) and returns the event it wrote. Refused with
    /// [`RuntimeError::ThreadBusy`](crate::RuntimeError::ThreadBusy) while a
    /// turn runs; fails, writing nothing, when the thread has no turn after
    /// `to_turn`, that turn took no checkpoint, or no checkpointer handles
    /// the thread's workspace ("not supported").
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// let rolled_back = runtime.rollback_thread("t", 1).await?;
    /// println!("undid {} turns", rolled_back.rolled_back_turns.len());
    /// # Ok(()) }
    /// ```
    pub async fn rollback_thread(
        &self,
        thread_id: &str,
        to_turn: u32,
    ) -> anyhow::Result<ThreadRolledBack> {
        let thread = self.thread_state(thread_id).await?;
        let metadata = self.thread_metadata(thread_id).await?;
        let (workspace, checkpointer) = self.checkpointed_workspace(&metadata)?;
        let claim_id = format!("rollback-{}", uuid::Uuid::new_v4());
        thread.claim_new(claim_id.clone())?;
        let _claim = ThreadClaim {
            thread: &thread,
            id: claim_id,
        };
        let writer = self.open_writer(&thread).await?;
        // After the writer lease: every other process's events are in.
        let events = self.store.load_events(thread_id, 0).await?;
        let log = TurnLog::replay(&events);
        let next = log.turn_after(thread_id, to_turn)?;
        let checkpoint = next.checkpoint.clone().ok_or_else(|| {
            anyhow::anyhow!(
                "thread \"{thread_id}\" cannot go back to turn {to_turn}: no checkpoint was taken \
                 when turn {} started (see its events for why)",
                to_turn + 1
            )
        })?;
        let first_undone = (to_turn - log.base) as usize;
        let rolled_back_turns = log.turns[first_undone..]
            .iter()
            .map(|turn| turn.turn_id.clone())
            .collect();
        let transcript = transcript_before(&events, next.started_seq);
        checkpointer.restore(&workspace, &checkpoint).await?;
        let event = ThreadRolledBack {
            thread_id: thread_id.to_string(),
            to_turn,
            rolled_back_turns,
            checkpoint,
            transcript,
        };
        let mut cursor = thread.log.lock().await;
        self.bus
            .emit_locked(
                &mut cursor,
                thread_id,
                None,
                RoderEvent::ThreadRolledBack(event.clone()),
            )
            .await?;
        writer.release_locked(&mut cursor);
        Ok(event)
    }
}
