//! The helper's side: reads requests from one stream, runs each on its own
//! thread, and writes replies to the other. std and libc only, so the
//! binary builds static and starts in a millisecond.
//!
//! When the request stream ends (the host process exited, was killed, or
//! dropped the connection) every running command's tree is killed and the
//! helper exits: nothing it started outlives the host's interest in it.

mod command;
mod files;
mod kill;
mod outbox;

use std::io::{self, Read, Write};
use std::sync::Arc;

use crate::message::{PROTOCOL_VERSION, Reply, Request};
use crate::wire::FrameReader;

use command::Commands;
pub use kill::kill_marked;
use outbox::Outbox;

/// Serves requests from `input` until it ends; replies go to `output`.
pub fn serve(mut input: impl Read, output: impl Write + Send + 'static) -> io::Result<()> {
    let outbox = Arc::new(Outbox::new(Box::new(output)));
    let commands = Commands::default();
    outbox.send(
        0,
        &Reply::Hello {
            version: PROTOCOL_VERSION,
            pid: std::process::id(),
        },
    )?;
    let mut reader = FrameReader::default();
    let mut chunk = vec![0; 256 * 1024];
    let result = loop {
        let read = match input.read(&mut chunk) {
            Ok(0) => break Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => break Err(error),
        };
        reader.push(chunk.get(..read).unwrap_or_default());
        match dispatch_ready(&mut reader, &outbox, &commands) {
            Ok(()) => {}
            Err(error) => break Err(error),
        }
    };
    commands.kill_all();
    result
}

/// Handles every whole frame buffered so far. A frame that cannot be cut
/// out ends the connection (the stream cannot be resynchronised); a frame
/// whose message does not decode is answered with an error.
fn dispatch_ready(
    reader: &mut FrameReader,
    outbox: &Arc<Outbox>,
    commands: &Commands,
) -> io::Result<()> {
    loop {
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(()),
            Err(error) => {
                let message = format!("unreadable request stream: {error}");
                let _ = outbox.send(
                    0,
                    &Reply::Failed {
                        errno: 0,
                        message: message.clone(),
                    },
                );
                return Err(io::Error::new(io::ErrorKind::InvalidData, message));
            }
        };
        let id = frame.id;
        match Request::decode(&frame) {
            Ok(request) => handle(id, request, outbox, commands),
            Err(error) => {
                let _ = outbox.send(
                    id,
                    &Reply::Failed {
                        errno: 0,
                        message: format!("malformed request: {error}"),
                    },
                );
            }
        }
    }
}

fn handle(id: u64, request: Request, outbox: &Arc<Outbox>, commands: &Commands) {
    match request {
        Request::Exec(spec) => commands.start(id, spec, outbox),
        Request::Stdin(data) => commands.stdin(id, data),
        Request::Kill => commands.kill(id),
        other => {
            // File operations may block (a FIFO, a slow disk): never on the
            // reading thread, which must stay free for kills.
            let sender = Arc::clone(outbox);
            let spawned = std::thread::Builder::new()
                .name("roder-executor-file".to_string())
                .spawn(move || {
                    let reply = files::handle(other);
                    let _ = sender.send(id, &reply);
                });
            if let Err(error) = spawned {
                let _ = outbox.send(id, &files::failed(&error));
            }
        }
    }
}
