//! Length-prefixed framing (`[u32 LE length][message]`) and a buffer pool.

use std::fmt;
use std::io::{self, Read, Write};

/// DEFAULT_MAX_FRAME = 16 MiB: above the largest message of the size sweep
/// (1 MiB payload) with room to spare, small enough that a hostile length
/// prefix cannot make a server reserve gigabytes.
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// Bytes of the length prefix.
pub const PREFIX_LEN: usize = 4;

/// RETAIN_CAP = 256 KiB: a reader keeps a buffer up to this size between
/// frames (every frame of the transport sweep, up to 64 KiB payloads plus
/// envelope, reuses it, so steady loops stay allocation-free); a larger one,
/// grown for one large frame, is given back before the next frame, so one
/// large frame never pins its size for a connection's life.
pub const RETAIN_CAP: usize = 256 << 10;

/// READ_CHUNK = 64 KiB: the body buffer grows at most this far ahead of the
/// bytes that have arrived, so a prefix announcing 16 MiB followed by a stall
/// costs 64 KiB, not 16 MiB.
pub const READ_CHUNK: usize = 64 << 10;

/// Why a frame could not be read or written.
#[derive(Debug)]
pub enum FrameError {
    /// The prefix announces more than the configured maximum.
    TooLarge {
        len: usize,
        max: usize,
    },
    /// The stream ended inside a frame: `len` announced, `got` bytes arrived
    /// (counting the prefix bytes when the prefix itself was cut).
    Truncated {
        len: usize,
        got: usize,
    },
    Io(io::Error),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLarge { len, max } => {
                write!(f, "frame length {len} exceeds the maximum of {max} bytes")
            }
            FrameError::Truncated { len, got } => {
                write!(f, "stream ended inside a frame of length {len} after {got} bytes")
            }
            FrameError::Io(e) => write!(f, "frame i/o: {e}"),
        }
    }
}

impl std::error::Error for FrameError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FrameError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        FrameError::Io(e)
    }
}

/// Decodes one frame from the front of `buf` without any I/O: the frame body
/// and the bytes consumed, `Ok(None)` if more bytes are needed.
pub fn decode_frame(buf: &[u8], max: usize) -> Result<Option<(&[u8], usize)>, FrameError> {
    let Some(prefix) = buf.first_chunk::<PREFIX_LEN>() else {
        return Ok(None);
    };
    let len = u32::from_le_bytes(*prefix) as usize;
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    Ok(buf.get(PREFIX_LEN..PREFIX_LEN + len).map(|body| (body, PREFIX_LEN + len)))
}

/// Reads frames from a byte stream into one reused buffer.
pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    max: usize,
}

impl<R: Read> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_max(inner, DEFAULT_MAX_FRAME)
    }
    pub fn with_max(inner: R, max: usize) -> Self {
        FrameReader { inner, buf: Vec::new(), max }
    }
    pub fn get_ref(&self) -> &R {
        &self.inner
    }
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Reads the next frame. `Ok(None)` at a clean end of stream (between frames).
    ///
    /// PERF: the body lands in a buffer reused across calls; after the largest
    /// frame (up to [`RETAIN_CAP`]) has been seen once, reading allocates
    /// nothing. The announced length is checked against the maximum before
    /// any byte is reserved; the buffer then grows with the bytes that arrive
    /// ([`READ_CHUNK`] ahead at most, doubling, never past the frame's exact
    /// length), and a buffer grown past [`RETAIN_CAP`] is released before the
    /// next frame.
    pub fn read_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        if self.buf.capacity() > RETAIN_CAP {
            self.buf = Vec::new();
        }
        let mut prefix = [0u8; PREFIX_LEN];
        let got = read_full(&mut self.inner, &mut prefix)?;
        if got == 0 {
            return Ok(None);
        }
        if got < PREFIX_LEN {
            return Err(FrameError::Truncated { len: PREFIX_LEN, got });
        }
        let len = u32::from_le_bytes(prefix) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        self.buf.clear();
        while self.buf.len() < len {
            let have = self.buf.len();
            let want = (have + READ_CHUNK).min(len);
            grow_towards(&mut self.buf, want, len);
            self.buf.resize(want, 0);
            let got = read_full(&mut self.inner, &mut self.buf[have..want])?;
            self.buf.truncate(have + got);
            if got < want - have {
                return Err(FrameError::Truncated { len, got: have + got });
            }
        }
        Ok(Some(&self.buf))
    }
}

/// Makes room for `want` bytes in `buf`, doubling (so a large frame costs
/// O(len) copying) but never reserving past `limit`, the frame's exact length.
pub fn grow_towards(buf: &mut Vec<u8>, want: usize, limit: usize) {
    if buf.capacity() >= want {
        return;
    }
    let target = want.max(buf.capacity().saturating_mul(2)).min(limit.max(want));
    buf.reserve_exact(target - buf.len());
}

/// Reads until `buf` is full or the stream ends; the count read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Writes frames, batching them in a reused buffer until [`FrameWriter::flush`].
pub struct FrameWriter<W> {
    inner: W,
    buf: Vec<u8>,
    max: usize,
}

impl<W: Write> FrameWriter<W> {
    pub fn new(inner: W) -> Self {
        Self::with_max(inner, DEFAULT_MAX_FRAME)
    }
    pub fn with_max(inner: W, max: usize) -> Self {
        FrameWriter { inner, buf: Vec::new(), max }
    }
    pub fn get_ref(&self) -> &W {
        &self.inner
    }
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// Queues one frame. PERF: copies into a reused buffer so a batch of
    /// pipelined calls leaves in one write.
    pub fn push(&mut self, msg: &[u8]) -> Result<(), FrameError> {
        if msg.len() > self.max {
            return Err(FrameError::TooLarge { len: msg.len(), max: self.max });
        }
        self.buf.extend_from_slice(&(msg.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(msg);
        Ok(())
    }

    /// Sends every queued frame.
    pub fn flush(&mut self) -> Result<(), FrameError> {
        if !self.buf.is_empty() {
            self.inner.write_all(&self.buf)?;
            self.buf.clear();
        }
        self.inner.flush()?;
        Ok(())
    }

    /// Queues one frame and sends it.
    pub fn write_frame(&mut self, msg: &[u8]) -> Result<(), FrameError> {
        self.push(msg)?;
        self.flush()
    }

    /// Bytes queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// A free list of byte buffers, so steady request/response loops reuse
/// memory instead of allocating per frame.
///
/// Bounded twice: at most `max_buffers` are kept, and a buffer that grew past
/// `max_capacity` is dropped instead of kept (one huge frame must not pin memory).
pub struct BufPool {
    free: Vec<Vec<u8>>,
    max_buffers: usize,
    max_capacity: usize,
}

impl BufPool {
    pub fn new(max_buffers: usize, max_capacity: usize) -> Self {
        // NOTE: the free list starts empty and unallocated: an idle connection's
        // pool costs nothing until a buffer is returned to it.
        BufPool { free: Vec::new(), max_buffers, max_capacity }
    }
    /// An empty buffer, reused when one is free.
    pub fn get(&mut self) -> Vec<u8> {
        self.free.pop().unwrap_or_default()
    }
    /// Returns a buffer to the pool (or drops it when the pool is full).
    pub fn put(&mut self, mut buf: Vec<u8>) {
        if self.free.len() < self.max_buffers && buf.capacity() <= self.max_capacity {
            buf.clear();
            self.free.push(buf);
        }
    }
    /// Buffers currently free.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }
    /// Drops every free buffer (and the list itself), for an idle owner.
    pub fn release(&mut self) {
        self.free = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_frames_and_reports_clean_eof() {
        let mut w = FrameWriter::new(Vec::new());
        w.write_frame(b"hello").unwrap();
        w.write_frame(b"").unwrap();
        let bytes = w.get_ref().clone();
        let mut r = FrameReader::new(&bytes[..]);
        assert_eq!(r.read_frame().unwrap(), Some(&b"hello"[..]));
        assert_eq!(r.read_frame().unwrap(), Some(&b""[..]));
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn oversized_frame_names_its_length_and_reserves_nothing() {
        let bytes = [0xff, 0xff, 0xff, 0x7f];
        let mut r = FrameReader::with_max(&bytes[..], 1024);
        match r.read_frame() {
            Err(FrameError::TooLarge { len, max }) => assert_eq!((len, max), (0x7fff_ffff, 1024)),
            other => panic!("expected TooLarge, got {other:?}"),
        }
        assert_eq!(r.buf.capacity(), 0);
        assert!(r.buf.capacity() == 0, "no reservation for a rejected length");
    }

    #[test]
    fn truncated_frame_names_announced_and_received_lengths() {
        let bytes = [10, 0, 0, 0, 1, 2, 3];
        let err = FrameReader::new(&bytes[..]).read_frame().unwrap_err();
        assert!(matches!(err, FrameError::Truncated { len: 10, got: 3 }), "{err:?}");
        assert_eq!(err.to_string(), "stream ended inside a frame of length 10 after 3 bytes");
        let err = FrameReader::new(&bytes[..2]).read_frame().unwrap_err();
        assert!(matches!(err, FrameError::Truncated { len: 4, got: 2 }), "{err:?}");
    }

    #[test]
    fn a_stalled_large_frame_reserves_only_what_arrived() {
        // 16 MiB announced, 10 bytes sent, then the stream ends.
        let mut bytes = (16u32 << 20).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[7; 10]);
        let mut r = FrameReader::new(&bytes[..]);
        let err = r.read_frame().unwrap_err();
        assert!(matches!(err, FrameError::Truncated { len, got: 10 } if len == 16 << 20), "{err:?}");
        assert!(r.buf.capacity() <= READ_CHUNK, "reserved {} bytes for 10 that arrived", r.buf.capacity());
    }

    #[test]
    fn large_frame_reserves_exactly_and_is_given_back() {
        let big = vec![5u8; 3 << 20];
        let mut w = FrameWriter::new(Vec::new());
        w.write_frame(&big).unwrap();
        w.write_frame(b"small").unwrap();
        let bytes = w.get_ref().clone();
        let mut r = FrameReader::new(&bytes[..]);
        assert_eq!(r.read_frame().unwrap().map(<[u8]>::len), Some(big.len()));
        assert!(r.buf.capacity() <= big.len(), "capacity {} > frame {}", r.buf.capacity(), big.len());
        assert_eq!(r.read_frame().unwrap(), Some(&b"small"[..]));
        assert!(r.buf.capacity() <= RETAIN_CAP, "kept {} bytes after a large frame", r.buf.capacity());
    }

    #[test]
    fn decode_frame_needs_whole_frames() {
        assert!(decode_frame(&[3, 0, 0], 16).unwrap().is_none());
        assert!(decode_frame(&[3, 0, 0, 0, 1], 16).unwrap().is_none());
        assert_eq!(decode_frame(&[1, 0, 0, 0, 9, 9], 16).unwrap(), Some((&[9u8][..], 5)));
        assert!(matches!(decode_frame(&[17, 0, 0, 0], 16), Err(FrameError::TooLarge { len: 17, max: 16 })));
    }

    #[test]
    fn pool_reuses_and_bounds() {
        let mut pool = BufPool::new(1, 64);
        let mut a = pool.get();
        a.extend_from_slice(&[1; 32]);
        let cap = a.capacity();
        pool.put(a);
        let b = pool.get();
        assert!(b.is_empty() && b.capacity() == cap);
        pool.put(vec![0; 1000]);
        assert_eq!(pool.free_count(), 0, "oversized buffer dropped");
    }
}
