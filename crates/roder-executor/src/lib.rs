//! The sandbox executor.
//!
//! A docker exec costs tens of milliseconds in the Engine API alone, and a
//! file read or write through the archive API another round trip. The
//! executor pays that once: Roder copies this small static helper into a
//! sandbox, starts it once per session over one attached stream, and from
//! then on a command, a file read or write, a stat or a listing is one
//! message on that stream, and any number run at once.
//!
//! * [`wire`]: framing, bounded and panic-free on any input.
//! * [`message`]: the requests and replies.
//! * [`server`]: the helper's side (std and libc only; the `roder-executor`
//!   binary is `server::serve` over stdin and stdout).
//! * `client` (feature `client`): the host's side, over any byte stream.

pub mod message;
#[cfg(unix)]
pub mod server;
pub mod wire;

#[cfg(feature = "client")]
pub mod client;
