//! Framing and the primitive encodings every message is made of.
//!
//! A frame is `u32 length (little endian) | u8 kind | u64 id | payload`, the
//! length counting everything after itself. Binary and length-prefixed, so a
//! file's bytes or a command's output travel as they are, with no escaping
//! and no allocation beyond the frame itself. Both ends parse what the other
//! sends as untrusted: the helper runs inside a sandbox whose commands could
//! replace it, so the host's decoder bounds every length and never panics.

use std::fmt;

/// Largest frame either side accepts (a frame is one message; file contents
/// and output chunks are far smaller than this).
pub const MAX_FRAME_BYTES: usize = 300 << 20;

/// Bytes before a frame's payload: length, kind, id.
pub const HEADER_BYTES: usize = 4 + 1 + 8;

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

fn error(message: impl Into<String>) -> WireError {
    WireError(message.into())
}

/// One decoded frame: its kind byte, request id and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub id: u64,
    pub payload: Vec<u8>,
}

/// Builds one frame's bytes; the length is filled in by [`Encoder::finish`].
pub struct Encoder {
    bytes: Vec<u8>,
}

impl Encoder {
    pub fn new(kind: u8, id: u64) -> Self {
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(&[0; 4]);
        bytes.push(kind);
        bytes.extend_from_slice(&id.to_le_bytes());
        Self { bytes }
    }

    pub fn u8(&mut self, value: u8) -> &mut Self {
        self.bytes.push(value);
        self
    }

    pub fn u32(&mut self, value: u32) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn i32(&mut self, value: i32) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    pub fn i64(&mut self, value: i64) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// A byte string: `u32` length, then the bytes. Longer than `u32::MAX`
    /// cannot be framed at all ([`MAX_FRAME_BYTES`] is far below it), so the
    /// length saturates and the peer refuses the frame.
    pub fn bytes(&mut self, value: &[u8]) -> &mut Self {
        self.u32(u32::try_from(value.len()).unwrap_or(u32::MAX));
        self.bytes.extend_from_slice(value);
        self
    }

    /// A list of byte strings: `u32` count, then each.
    pub fn list<T: AsRef<[u8]>>(&mut self, values: &[T]) -> &mut Self {
        self.u32(u32::try_from(values.len()).unwrap_or(u32::MAX));
        for value in values {
            self.bytes(value.as_ref());
        }
        self
    }

    /// The frame's bytes, length prefix included.
    pub fn finish(mut self) -> Vec<u8> {
        let length = u32::try_from(self.bytes.len() - 4).unwrap_or(u32::MAX);
        if let Some(prefix) = self.bytes.get_mut(..4) {
            prefix.copy_from_slice(&length.to_le_bytes());
        }
        self.bytes
    }
}

/// Reads primitives off a payload, every read bounds-checked.
pub struct Decoder<'a> {
    rest: &'a [u8],
}

impl<'a> Decoder<'a> {
    pub fn new(payload: &'a [u8]) -> Self {
        Self { rest: payload }
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], WireError> {
        if self.rest.len() < count {
            return Err(error(format!(
                "truncated message: needed {count} more bytes, {} left",
                self.rest.len()
            )));
        }
        let (head, tail) = self.rest.split_at(count);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut array = [0; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    pub fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    pub fn bytes(&mut self) -> Result<Vec<u8>, WireError> {
        let length = self.u32()? as usize;
        Ok(self.take(length)?.to_vec())
    }

    pub fn list(&mut self) -> Result<Vec<Vec<u8>>, WireError> {
        let count = self.u32()? as usize;
        // Each entry takes at least its 4-byte length: a count beyond what
        // is left is a lie, refused before anything is allocated for it.
        if count > self.rest.len() / 4 {
            return Err(error(format!(
                "list of {count} entries in {} bytes",
                self.rest.len()
            )));
        }
        (0..count).map(|_| self.bytes()).collect()
    }

    /// Refuses trailing bytes: a message is exactly its fields.
    pub fn end(self) -> Result<(), WireError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(error(format!(
                "{} unexpected bytes after the message",
                self.rest.len()
            )))
        }
    }
}

/// Cuts frames out of a byte stream that arrives in arbitrary chunks.
#[derive(Default)]
pub struct FrameReader {
    buffer: Vec<u8>,
    start: usize,
}

impl FrameReader {
    pub fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 && self.start == self.buffer.len() {
            self.buffer.clear();
            self.start = 0;
        }
        self.buffer.extend_from_slice(chunk);
    }

    /// The next whole frame, `None` when more bytes are needed, or an error
    /// for a frame no peer may send (the stream cannot be resynchronised
    /// after that, so the caller drops the connection).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, WireError> {
        let pending = self.buffer.get(self.start..).unwrap_or_default();
        let Some(prefix) = pending.get(..4) else {
            return Ok(None);
        };
        let mut length = [0; 4];
        length.copy_from_slice(prefix);
        let length = u32::from_le_bytes(length) as usize;
        if length < HEADER_BYTES - 4 {
            return Err(error(format!(
                "frame of {length} bytes is shorter than its header"
            )));
        }
        if length > MAX_FRAME_BYTES {
            return Err(error(format!(
                "frame of {length} bytes is over the {MAX_FRAME_BYTES}-byte limit"
            )));
        }
        let Some(body) = pending.get(4..4 + length) else {
            return Ok(None);
        };
        let mut decoder = Decoder::new(body);
        let kind = decoder.u8()?;
        let id = decoder.u64()?;
        let payload = decoder.rest.to_vec();
        self.start += 4 + length;
        // Keep the buffer from growing without bound on a long stream.
        if self.start > (1 << 20) && self.start * 2 > self.buffer.len() {
            self.buffer.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(Frame { kind, id, payload }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_frame_survives_any_chunking() {
        let mut encoder = Encoder::new(7, 42);
        encoder.bytes(b"hello").u64(9).list(&[b"a".as_slice(), b""]);
        let frame = encoder.finish();
        for split in 0..frame.len() {
            let mut reader = FrameReader::default();
            reader.push(&frame[..split]);
            assert_eq!(reader.next_frame().unwrap(), None);
            reader.push(&frame[split..]);
            let decoded = reader.next_frame().unwrap().unwrap();
            assert_eq!((decoded.kind, decoded.id), (7, 42));
            let mut decoder = Decoder::new(&decoded.payload);
            assert_eq!(decoder.bytes().unwrap(), b"hello");
            assert_eq!(decoder.u64().unwrap(), 9);
            assert_eq!(decoder.list().unwrap(), vec![b"a".to_vec(), Vec::new()]);
            decoder.end().unwrap();
            assert_eq!(reader.next_frame().unwrap(), None);
        }
    }

    #[test]
    fn oversized_and_short_frames_are_refused() {
        let mut reader = FrameReader::default();
        reader.push(&u32::MAX.to_le_bytes());
        assert!(reader.next_frame().unwrap_err().0.contains("over the"));
        let mut reader = FrameReader::default();
        reader.push(&3u32.to_le_bytes());
        assert!(reader.next_frame().unwrap_err().0.contains("shorter"));
    }

    #[test]
    fn a_lying_list_count_is_refused_without_allocating() {
        let mut payload = Vec::new();
        payload.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(
            Decoder::new(&payload)
                .list()
                .unwrap_err()
                .0
                .contains("entries")
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_the_reader(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8)) {
            let mut reader = FrameReader::default();
            for chunk in &chunks {
                reader.push(chunk);
                while let Ok(Some(frame)) = reader.next_frame() {
                    let mut decoder = Decoder::new(&frame.payload);
                    let _ = decoder.list();
                    let _ = decoder.bytes();
                    let _ = decoder.i64();
                }
            }
        }
    }
}
