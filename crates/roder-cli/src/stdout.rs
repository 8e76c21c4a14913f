//! Everything `roder` writes to stdout, and what happens when the reader
//! goes away (`roder threads list | head -1`).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails with EPIPE, and
//! `println!` panics on that. Restoring SIGPIPE's default would also kill
//! Roder whenever a model's command, an MCP server or a socket peer closes
//! a pipe Roder writes to. So only stdout gets the Unix behaviour: every
//! write to it goes through this module (`println!` is denied in this
//! crate), a closed reader is recorded and ends the command's work with an
//! error, and `main`, once the command has cleaned up (saved its thread,
//! released its sandboxes), exits the way SIGPIPE kills a process, with
//! nothing on stderr.

use std::io::Write as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

/// Set once a write to stdout found its reader gone.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Ends the process as SIGPIPE would when a write found stdout's reader
/// gone, whatever the command made of the failed write: no message.
pub fn exit_if_closed() {
    if CLOSED.load(Ordering::SeqCst) {
        exit_as_sigpipe();
    }
}

fn observe(error: std::io::Error) -> std::io::Error {
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        CLOSED.store(true, Ordering::SeqCst);
    }
    error
}

/// Writes `text` to stdout as it is.
pub fn print(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(observe)
}

/// Writes one line to stdout; see [`outln!`](crate::outln).
pub fn line(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(observe)
}

/// `println!` that returns the write's error instead of panicking on it.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::stdout::line(format_args!($($arg)*))
    };
}

/// Stdout for async writers (`exec`'s answer and events, the stdio
/// servers), with a closed reader recorded like [`print`]'s.
pub fn tokio() -> Stdout {
    Stdout(tokio::io::stdout())
}

pub struct Stdout(tokio::io::Stdout);

impl AsyncWrite for Stdout {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf).map_err(observe)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx).map_err(observe)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx).map_err(observe)
    }
}

/// Ends the process the way SIGPIPE's default action does, so a shell
/// sees what it sees of `git` or `grep` (status 141 in `PIPESTATUS`).
pub fn exit_as_sigpipe() -> ! {
    // SAFETY: restores SIGPIPE's default disposition and raises it in this
    // process; neither touches memory.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // Not reached: the default action of SIGPIPE ends the process.
    std::process::exit(128 + libc::SIGPIPE)
}
