//! The messages: what the host asks ([`Request`]) and what the helper
//! answers ([`Reply`]), each one frame. Every request carries an id the host
//! chose; every reply names the request it belongs to, so any number of
//! requests run at once over the one stream.

use crate::wire::{Decoder, Encoder, Frame, WireError};

/// The protocol's version, sent in [`Reply::Hello`]. The host refuses a
/// helper of another version (a stale binary left in an image).
pub const PROTOCOL_VERSION: u32 = 1;

/// The environment variable that marks every process of one command (and
/// everything it starts), so a kill reaches the whole tree: background
/// children, `setsid` daemons and orphans included.
pub const MARKER_VAR: &str = "RODER_COMMAND_MARK";

/// One command to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecSpec {
    /// Program and arguments, run as given (no shell).
    pub argv: Vec<Vec<u8>>,
    /// Absolute working directory.
    pub cwd: Vec<u8>,
    /// `NAME=value` entries added to the helper's environment.
    pub env: Vec<Vec<u8>>,
    /// Kill the whole tree after this long; 0 is no limit.
    pub timeout_ms: u64,
    /// Whether stdin stays open for [`Request::Stdin`] (an interactive
    /// process such as an MCP server); otherwise it is `/dev/null`.
    pub stdin: bool,
}

/// What the host asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Exec(ExecSpec),
    /// Bytes for a running command's stdin; empty closes it.
    Stdin(Vec<u8>),
    /// Kill the command with this id and everything it started.
    Kill,
    /// A regular file's contents (links followed), refused past `max` bytes.
    ReadFile {
        path: Vec<u8>,
        max: u64,
    },
    /// Writes a file, creating missing parent directories; an existing file
    /// keeps its permission bits. `mode` applies to a new file (0: 0644).
    WriteFile {
        path: Vec<u8>,
        data: Vec<u8>,
        mode: u32,
    },
    /// `lstat` of a path.
    Stat {
        path: Vec<u8>,
    },
    /// A directory's entries.
    List {
        path: Vec<u8>,
    },
    /// The path with every symbolic link resolved, as far as it exists
    /// (missing trailing components are kept as given): where a write to
    /// it would land.
    Resolve {
        path: Vec<u8>,
    },
}

/// What kind of file a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl FileKind {
    fn code(self) -> u8 {
        match self {
            Self::File => 0,
            Self::Dir => 1,
            Self::Symlink => 2,
            Self::Other => 3,
        }
    }

    fn of(code: u8) -> Result<Self, WireError> {
        Ok(match code {
            0 => Self::File,
            1 => Self::Dir,
            2 => Self::Symlink,
            3 => Self::Other,
            other => return Err(WireError(format!("unknown file kind {other}"))),
        })
    }
}

/// A path's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStat {
    pub kind: FileKind,
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub mtime_secs: i64,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself: its code, or 128 + the signal that killed it.
    Exited(i32),
    /// Its timeout passed; the whole tree was killed.
    TimedOut,
    /// A [`Request::Kill`] (or the host going away) killed the tree.
    Killed,
}

/// What the helper answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The first frame (id 0): the helper is ready.
    Hello {
        version: u32,
        pid: u32,
    },
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// The command ended; `output_complete` is false when a process it left
    /// behind still held its output open after the drain grace.
    Exited {
        ending: Ending,
        output_complete: bool,
    },
    /// A file's contents.
    Data(Vec<u8>),
    /// A write (or stdin) succeeded.
    Done,
    Stat(FileStat),
    Listing(Vec<(Vec<u8>, FileKind)>),
    /// The request failed: the OS error number (0 if none) and a message.
    Failed {
        errno: i32,
        message: String,
    },
}

mod kind {
    pub const EXEC: u8 = 1;
    pub const STDIN: u8 = 2;
    pub const KILL: u8 = 3;
    pub const READ_FILE: u8 = 4;
    pub const WRITE_FILE: u8 = 5;
    pub const STAT: u8 = 6;
    pub const LIST: u8 = 7;
    pub const RESOLVE: u8 = 8;

    pub const HELLO: u8 = 100;
    pub const STDOUT: u8 = 101;
    pub const STDERR: u8 = 102;
    pub const EXITED: u8 = 103;
    pub const DATA: u8 = 104;
    pub const DONE: u8 = 105;
    pub const STAT_REPLY: u8 = 106;
    pub const LISTING: u8 = 107;
    pub const FAILED: u8 = 108;
}

impl Request {
    /// The frame for this request with id `id`.
    pub fn encode(&self, id: u64) -> Vec<u8> {
        let mut out;
        match self {
            Self::Exec(spec) => {
                out = Encoder::new(kind::EXEC, id);
                out.list(&spec.argv)
                    .bytes(&spec.cwd)
                    .list(&spec.env)
                    .u64(spec.timeout_ms)
                    .u8(u8::from(spec.stdin));
            }
            Self::Stdin(data) => {
                out = Encoder::new(kind::STDIN, id);
                out.bytes(data);
            }
            Self::Kill => out = Encoder::new(kind::KILL, id),
            Self::ReadFile { path, max } => {
                out = Encoder::new(kind::READ_FILE, id);
                out.bytes(path).u64(*max);
            }
            Self::WriteFile { path, data, mode } => {
                out = Encoder::new(kind::WRITE_FILE, id);
                out.bytes(path).bytes(data).u32(*mode);
            }
            Self::Stat { path } => {
                out = Encoder::new(kind::STAT, id);
                out.bytes(path);
            }
            Self::List { path } => {
                out = Encoder::new(kind::LIST, id);
                out.bytes(path);
            }
            Self::Resolve { path } => {
                out = Encoder::new(kind::RESOLVE, id);
                out.bytes(path);
            }
        }
        out.finish()
    }

    pub fn decode(frame: &Frame) -> Result<Self, WireError> {
        let mut input = Decoder::new(&frame.payload);
        let request = match frame.kind {
            kind::EXEC => Self::Exec(ExecSpec {
                argv: input.list()?,
                cwd: input.bytes()?,
                env: input.list()?,
                timeout_ms: input.u64()?,
                stdin: input.u8()? != 0,
            }),
            kind::STDIN => Self::Stdin(input.bytes()?),
            kind::KILL => Self::Kill,
            kind::READ_FILE => Self::ReadFile {
                path: input.bytes()?,
                max: input.u64()?,
            },
            kind::WRITE_FILE => Self::WriteFile {
                path: input.bytes()?,
                data: input.bytes()?,
                mode: input.u32()?,
            },
            kind::STAT => Self::Stat {
                path: input.bytes()?,
            },
            kind::LIST => Self::List {
                path: input.bytes()?,
            },
            kind::RESOLVE => Self::Resolve {
                path: input.bytes()?,
            },
            other => return Err(WireError(format!("unknown request kind {other}"))),
        };
        input.end()?;
        Ok(request)
    }
}

impl Reply {
    /// The frame for this reply to request `id`.
    pub fn encode(&self, id: u64) -> Vec<u8> {
        let mut out;
        match self {
            Self::Hello { version, pid } => {
                out = Encoder::new(kind::HELLO, id);
                out.u32(*version).u32(*pid);
            }
            Self::Stdout(data) => {
                out = Encoder::new(kind::STDOUT, id);
                out.bytes(data);
            }
            Self::Stderr(data) => {
                out = Encoder::new(kind::STDERR, id);
                out.bytes(data);
            }
            Self::Exited {
                ending,
                output_complete,
            } => {
                out = Encoder::new(kind::EXITED, id);
                let (tag, code) = match ending {
                    Ending::Exited(code) => (0, *code),
                    Ending::TimedOut => (1, 0),
                    Ending::Killed => (2, 0),
                };
                out.u8(tag).i32(code).u8(u8::from(*output_complete));
            }
            Self::Data(data) => {
                out = Encoder::new(kind::DATA, id);
                out.bytes(data);
            }
            Self::Done => out = Encoder::new(kind::DONE, id),
            Self::Stat(stat) => {
                out = Encoder::new(kind::STAT_REPLY, id);
                out.u8(stat.kind.code())
                    .u64(stat.size)
                    .u32(stat.mode)
                    .i64(stat.mtime_secs);
            }
            Self::Listing(entries) => {
                out = Encoder::new(kind::LISTING, id);
                out.u32(u32::try_from(entries.len()).unwrap_or(u32::MAX));
                for (name, file_kind) in entries {
                    out.bytes(name).u8(file_kind.code());
                }
            }
            Self::Failed { errno, message } => {
                out = Encoder::new(kind::FAILED, id);
                out.i32(*errno).bytes(message.as_bytes());
            }
        }
        out.finish()
    }

    pub fn decode(frame: &Frame) -> Result<Self, WireError> {
        let mut input = Decoder::new(&frame.payload);
        let reply = match frame.kind {
            kind::HELLO => Self::Hello {
                version: input.u32()?,
                pid: input.u32()?,
            },
            kind::STDOUT => Self::Stdout(input.bytes()?),
            kind::STDERR => Self::Stderr(input.bytes()?),
            kind::EXITED => {
                let tag = input.u8()?;
                let code = input.i32()?;
                let ending = match tag {
                    0 => Ending::Exited(code),
                    1 => Ending::TimedOut,
                    2 => Ending::Killed,
                    other => return Err(WireError(format!("unknown ending {other}"))),
                };
                Self::Exited {
                    ending,
                    output_complete: input.u8()? != 0,
                }
            }
            kind::DATA => Self::Data(input.bytes()?),
            kind::DONE => Self::Done,
            kind::STAT_REPLY => Self::Stat(FileStat {
                kind: FileKind::of(input.u8()?)?,
                size: input.u64()?,
                mode: input.u32()?,
                mtime_secs: input.i64()?,
            }),
            kind::LISTING => {
                let count = input.u32()? as usize;
                if count > frame.payload.len() / 5 {
                    return Err(WireError(format!("listing of {count} entries is too long")));
                }
                let mut entries = Vec::with_capacity(count);
                for _ in 0..count {
                    let name = input.bytes()?;
                    entries.push((name, FileKind::of(input.u8()?)?));
                }
                Self::Listing(entries)
            }
            kind::FAILED => Self::Failed {
                errno: input.i32()?,
                message: String::from_utf8_lossy(&input.bytes()?).into_owned(),
            },
            other => return Err(WireError(format!("unknown reply kind {other}"))),
        };
        input.end()?;
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::FrameReader;
    use proptest::prelude::*;

    fn frame_of(bytes: &[u8]) -> Frame {
        let mut reader = FrameReader::default();
        reader.push(bytes);
        reader.next_frame().unwrap().unwrap()
    }

    #[test]
    fn every_request_round_trips() {
        let requests = [
            Request::Exec(ExecSpec {
                argv: vec![b"sh".to_vec(), b"-c".to_vec(), b"echo \0 hi".to_vec()],
                cwd: b"/workspace".to_vec(),
                env: vec![b"A=1".to_vec()],
                timeout_ms: 5,
                stdin: true,
            }),
            Request::Stdin(vec![0, 255]),
            Request::Kill,
            Request::ReadFile {
                path: b"/a".to_vec(),
                max: 9,
            },
            Request::WriteFile {
                path: b"/b".to_vec(),
                data: vec![1, 2, 3],
                mode: 0o755,
            },
            Request::Stat {
                path: b"/".to_vec(),
            },
            Request::List {
                path: b"/".to_vec(),
            },
            Request::Resolve {
                path: b"/a/b".to_vec(),
            },
        ];
        for (id, request) in requests.iter().enumerate() {
            let frame = frame_of(&request.encode(id as u64));
            assert_eq!(frame.id, id as u64);
            assert_eq!(&Request::decode(&frame).unwrap(), request);
        }
    }

    #[test]
    fn every_reply_round_trips() {
        let replies = [
            Reply::Hello { version: 1, pid: 7 },
            Reply::Stdout(b"out".to_vec()),
            Reply::Stderr(vec![0xff]),
            Reply::Exited {
                ending: Ending::Exited(-3),
                output_complete: true,
            },
            Reply::Exited {
                ending: Ending::TimedOut,
                output_complete: false,
            },
            Reply::Exited {
                ending: Ending::Killed,
                output_complete: true,
            },
            Reply::Data(vec![9; 10]),
            Reply::Done,
            Reply::Stat(FileStat {
                kind: FileKind::Symlink,
                size: 3,
                mode: 0o644,
                mtime_secs: -1,
            }),
            Reply::Listing(vec![
                (b"a".to_vec(), FileKind::Dir),
                (b"b".to_vec(), FileKind::Other),
            ]),
            Reply::Failed {
                errno: 2,
                message: "no such file".to_string(),
            },
        ];
        for reply in replies {
            let frame = frame_of(&reply.encode(3));
            assert_eq!(Reply::decode(&frame).unwrap(), reply);
        }
    }

    #[test]
    fn trailing_bytes_and_unknown_kinds_are_refused() {
        let mut bytes = Reply::Done.encode(1);
        bytes.push(0);
        let length = (bytes.len() - 4) as u32;
        bytes[..4].copy_from_slice(&length.to_le_bytes());
        assert!(Reply::decode(&frame_of(&bytes)).is_err());
        let frame = Frame {
            kind: 250,
            id: 1,
            payload: Vec::new(),
        };
        assert!(Reply::decode(&frame).is_err());
        assert!(Request::decode(&frame).is_err());
    }

    proptest! {
        #[test]
        fn any_payload_decodes_or_errors(kind in any::<u8>(), payload in proptest::collection::vec(any::<u8>(), 0..96)) {
            let frame = Frame { kind, id: 1, payload };
            let _ = Reply::decode(&frame);
            let _ = Request::decode(&frame);
        }
    }
}
