//! The reply stream, shared by every thread: each frame is written whole
//! under one lock, so frames never interleave.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::message::Reply;

pub struct Outbox {
    writer: Mutex<Box<dyn Write + Send>>,
}

impl Outbox {
    pub fn new(writer: Box<dyn Write + Send>) -> Self {
        Self {
            writer: Mutex::new(writer),
        }
    }

    pub fn send(&self, id: u64, reply: &Reply) -> io::Result<()> {
        let frame = reply.encode(id);
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        writer.write_all(&frame)?;
        writer.flush()
    }

    /// Sends `reply` unless `finished` is set; with `finish`, sets it in the
    /// same critical section. A command's output read after its `Exited`
    /// was sent is dropped here, so the host never sees output after the end.
    pub fn send_unless_finished(
        &self,
        id: u64,
        reply: &Reply,
        finished: &AtomicBool,
        finish: bool,
    ) -> io::Result<()> {
        let frame = reply.encode(id);
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if finished.load(Ordering::Acquire) {
            return Ok(());
        }
        if finish {
            finished.store(true, Ordering::Release);
        }
        writer.write_all(&frame)?;
        writer.flush()
    }
}
