//! Length-prefixed framing (`[u32 LE length][message]`) and a buffer pool.

use std::fmt;
use std::io::{self, Read, Write};

/// DEFAULT_MAX_FRAME = 16 MiB: above the largest message of the size sweep
/// (1 MiB payload) with room to spare, small enough that a hostile length
/// prefix cannot make a server reserve gigabytes.
pub const DEFAULT_MAX_FRAME: usize = 16 << 20;

/// Bytes of the length prefix.
pub const PREFIX_LEN: usize = 4;

/// READER_SLACK = 12 bytes: what a [`FrameReader`] may hold beyond its
/// maximum frame, whatever arrives: the frame's own prefix ([`PREFIX_LEN`])
/// and up to 8 bytes in front of it so that the body is 8-byte aligned. A
/// reader with maximum `max` never holds a buffer larger than
/// `max + READER_SLACK` bytes (`tests/frame_bound.rs` holds every read path
/// to it at the limit and one byte over). The bound is stated rather than
/// squeezed: the alignment's share depends on the address the allocator
/// returns, known only after the buffer is allocated.
pub const READER_SLACK: usize = PREFIX_LEN + ALIGN;

/// RETAIN_CAP = 256 KiB: a reader keeps a buffer up to this size between
/// frames (every frame of the transport sweep, up to 64 KiB payloads plus
/// envelope, reuses it, so steady loops stay allocation-free); a larger one,
/// grown for one large frame, is given back before the next frame, so one
/// large frame never pins its size for a connection's life.
pub const RETAIN_CAP: usize = 256 << 10;

/// READ_AHEAD = 4 KiB: what a reader asks the stream for when its frames are
/// small — one loopback segment's worth of requests, so a pipelined batch of
/// small calls arrives in one `read`. It is also the least a reader keeps.
pub const READ_AHEAD: usize = 4 << 10;

/// ALIGN = 8: frame bodies are returned 8-byte aligned, as a fresh
/// allocation would be, because zero-copy readers of word-based formats
/// (Cap'n Proto's flat-slice reader) refuse unaligned input. The read-ahead
/// buffer puts each frame's prefix 4 bytes before an aligned offset, and
/// moves the rest of a batch by under 8 bytes when a frame ends unaligned.
const ALIGN: usize = 8;

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

/// Reads frames from a byte stream through one reused, read-ahead buffer,
/// never larger than the maximum frame plus [`READER_SLACK`].
///
/// PERF: one `read` takes whatever the socket holds — usually the whole
/// frame, prefix and body, and any frames queued behind it (a pipelined
/// batch, or a `finish` travelling with the next call) — so a frame costs one
/// system call, not two, and a batch of n frames one instead of 2n. The
/// bytes read past the current frame stay in the buffer for the next call,
/// so the inner reader must not be read from directly in between.
pub struct FrameReader<R> {
    inner: R,
    /// Initialised once; bytes `start..end` arrived and are not yet returned.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max: usize,
    /// Bytes moved to align bodies (what the PERF note of `align_body` bounds).
    #[cfg(test)]
    moved: usize,
}

impl<R: Read> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_max(inner, DEFAULT_MAX_FRAME)
    }
    pub fn with_max(inner: R, max: usize) -> Self {
        FrameReader {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            max,
            #[cfg(test)]
            moved: 0,
        }
    }
    pub fn get_ref(&self) -> &R {
        &self.inner
    }
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// Where a frame must start for its body to be aligned.
    fn head(&self) -> usize {
        head_of(&self.buf)
    }

    /// Aligns the body (`len` bytes) of the complete frame at `start`;
    /// returns where the body is and where the next frame begins. Frames
    /// after the first of a batch are the only ones that can need it (the
    /// front is aligned already).
    ///
    /// PERF: the body moves back over its own prefix and bytes already
    /// returned, so only this frame's bytes move. Moving every unread byte
    /// instead made a batch of n frames cost n times the batch: 64 answers
    /// of a pipelined chain moved ~6 KiB each.
    fn align_body(&mut self, len: usize) -> (usize, usize) {
        let body = self.start + PREFIX_LEN;
        let mis = (self.buf.as_ptr() as usize + body) % ALIGN;
        if mis == 0 {
            return (body, body + len);
        }
        if body >= mis {
            #[cfg(test)]
            {
                self.moved += len;
            }
            self.buf.copy_within(body..body + len, body - mis);
            return (body - mis, body + len);
        }
        // At the front, with no room behind: the unread bytes move forward.
        let to = self.start + ALIGN - mis;
        if to + (self.end - self.start) > self.buf.len() {
            self.buf.resize(to + (self.end - self.start), 0);
        }
        #[cfg(test)]
        {
            self.moved += self.end - self.start;
        }
        self.buf.copy_within(self.start..self.end, to);
        (self.start, self.end) = (to, to + self.end - self.start);
        (self.start + PREFIX_LEN, self.start + PREFIX_LEN + len)
    }

    /// Reads the next frame. `Ok(None)` at a clean end of stream (between frames).
    ///
    /// PERF: the buffer is reused across calls; after the largest frame (up to
    /// [`RETAIN_CAP`]) has been seen once, reading allocates nothing. The
    /// announced length is checked against the maximum before any byte is
    /// reserved for the body; the buffer then grows with the bytes that
    /// arrive ([`READ_CHUNK`] ahead at most, doubling, never past the frame's
    /// exact end), and a buffer grown past [`RETAIN_CAP`] is released before
    /// the next frame.
    pub fn read_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        if self.start == self.end {
            // (An empty buffer has no address to align to yet.)
            let h = if self.buf.is_empty() { 0 } else { self.head() };
            (self.start, self.end) = (h, h);
        }
        if self.buf.capacity() > RETAIN_CAP && self.end - self.start <= READ_AHEAD {
            // The unread bytes wait on the stack while the large buffer is
            // freed before the small one is allocated, so the two never
            // live together and the reader's peak stays within its bound.
            let have = self.end - self.start;
            let mut kept = [0u8; READ_AHEAD];
            kept[..have].copy_from_slice(&self.buf[self.start..self.end]);
            self.buf = Vec::new();
            let mut small = vec![0u8; READ_AHEAD + ALIGN];
            let h = head_of(&small);
            small[h..h + have].copy_from_slice(&kept[..have]);
            (self.buf, self.start, self.end) = (small, h, h + have);
        }
        loop {
            let have = self.end - self.start;
            let need = match self.buf[self.start..self.end].first_chunk::<PREFIX_LEN>() {
                None => PREFIX_LEN,
                Some(prefix) => {
                    let len = u32::from_le_bytes(*prefix) as usize;
                    if len > self.max {
                        return Err(FrameError::TooLarge { len, max: self.max });
                    }
                    if have >= PREFIX_LEN + len {
                        let (body, next) = self.align_body(len);
                        self.start = next;
                        return Ok(Some(&self.buf[body..body + len]));
                    }
                    PREFIX_LEN + len
                }
            };
            if self.start + need > self.buf.len() {
                // Grow if the frame cannot fit even at the front, then move
                // the partial frame to the front (its body aligned).
                let fits = ALIGN + need;
                if fits > self.buf.len() {
                    let grown = if need <= READ_AHEAD {
                        READ_AHEAD + ALIGN
                    } else {
                        (have + READ_CHUNK).max(self.buf.len() * 2).min(fits)
                    };
                    self.buf.reserve_exact(grown - self.buf.len());
                    self.buf.resize(grown, 0);
                }
                let h = self.head();
                self.buf.copy_within(self.start..self.end, h);
                (self.start, self.end) = (h, h + have);
            }
            // A large frame is read only to its end: the next frame's bytes
            // wait in the socket rather than pin a large buffer's tail.
            let room = self.buf.len();
            let limit = if need > READ_AHEAD { (self.start + need).min(room) } else { room };
            let got = read_some(&mut self.inner, &mut self.buf[self.end..limit])?;
            if got == 0 {
                return match have {
                    0 => Ok(None),
                    h if h < PREFIX_LEN => Err(FrameError::Truncated { len: PREFIX_LEN, got: h }),
                    h => Err(FrameError::Truncated { len: need - PREFIX_LEN, got: h - PREFIX_LEN }),
                };
            }
            self.end += got;
        }
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

/// The offset in `buf` at which a frame's body (after its prefix) is aligned.
fn head_of(buf: &[u8]) -> usize {
    (ALIGN - (buf.as_ptr() as usize + PREFIX_LEN) % ALIGN) % ALIGN
}

/// One `read`, retried on interruption; 0 only at the end of the stream.
fn read_some<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other,
        }
    }
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
    /// A buffer that never allocated is not kept: it saves nothing, and a
    /// server releasing empty answers filled its pool with them.
    pub fn put(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() > 0 && self.free.len() < self.max_buffers && buf.capacity() <= self.max_capacity {
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
        assert!(r.buf.capacity() <= READ_AHEAD + ALIGN, "reserved {} bytes for a rejected length", r.buf.capacity());
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
        let arrived = bytes.len();
        assert!(
            r.buf.capacity() <= arrived + READ_CHUNK,
            "reserved {} bytes for {arrived} that arrived",
            r.buf.capacity()
        );
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
        // The prefix shares the buffer with the body.
        let frame = ALIGN + PREFIX_LEN + big.len();
        assert!(r.buf.capacity() <= frame, "capacity {} > frame {frame}", r.buf.capacity());
        assert_eq!(r.read_frame().unwrap(), Some(&b"small"[..]));
        assert!(r.buf.capacity() <= RETAIN_CAP, "kept {} bytes after a large frame", r.buf.capacity());
    }

    /// Counts `read` calls and hands out at most `step` bytes per call.
    struct Trickle<'a> {
        bytes: &'a [u8],
        step: usize,
        reads: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads += 1;
            let n = buf.len().min(self.step).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    fn frames(sizes: &[usize]) -> Vec<u8> {
        let mut w = FrameWriter::new(Vec::new());
        for (i, &n) in sizes.iter().enumerate() {
            w.push(&vec![i as u8; n]).unwrap();
        }
        w.flush().unwrap();
        w.get_ref().clone()
    }

    #[test]
    fn a_batch_of_small_frames_costs_one_read() {
        let bytes = frames(&[40, 0, 200, 7]);
        let mut r = FrameReader::new(Trickle { bytes: &bytes, step: usize::MAX, reads: 0 });
        for (i, n) in [40, 0, 200, 7].into_iter().enumerate() {
            assert_eq!(r.read_frame().unwrap(), Some(&vec![i as u8; n][..]));
        }
        assert_eq!(r.get_ref().reads, 1, "four frames, one read");
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn bodies_are_aligned_whatever_the_sizes_before_them() {
        let sizes = [3, 5, 0, 7, 1, 9, 70_000, 2];
        let bytes = frames(&sizes);
        for step in [1, 7, usize::MAX] {
            let mut r = FrameReader::new(Trickle { bytes: &bytes, step, reads: 0 });
            for (i, &n) in sizes.iter().enumerate() {
                let f = r.read_frame().unwrap().unwrap();
                assert_eq!(f, &vec![i as u8; n][..], "frame {i}, {step} bytes a read");
                assert_eq!(f.as_ptr() as usize % ALIGN, 0, "frame {i} unaligned, {step} bytes a read");
            }
        }
    }

    /// 64 answers of 96 bytes (zap messages are whole words) in one read:
    /// with its 4-byte prefix every other body is off by four, and aligning
    /// moves each such body once, not the rest of the batch behind it.
    #[test]
    fn aligning_a_batch_moves_each_frame_once() {
        let sizes = [96; 64];
        let bytes = frames(&sizes);
        let mut r = FrameReader::new(Trickle { bytes: &bytes, step: usize::MAX, reads: 0 });
        for (i, &n) in sizes.iter().enumerate() {
            let f = r.read_frame().unwrap().unwrap();
            assert_eq!((f, f.as_ptr() as usize % ALIGN), (&vec![i as u8; n][..], 0), "frame {i}");
        }
        assert!(r.moved <= sizes.iter().sum::<usize>(), "moved {} bytes for 6,144 of bodies", r.moved);
        assert!(r.moved > 0, "bodies after the first were off and had to move");
    }

    #[test]
    fn frames_split_anywhere_reassemble() {
        let sizes = [3, 5000, 0, 70_000, 1];
        let bytes = frames(&sizes);
        for step in [1, 3, 4, 5, 4096, 65_537] {
            let mut r = FrameReader::new(Trickle { bytes: &bytes, step, reads: 0 });
            for (i, &n) in sizes.iter().enumerate() {
                assert_eq!(r.read_frame().unwrap(), Some(&vec![i as u8; n][..]), "frame {i}, {step} bytes a read");
            }
            assert!(r.read_frame().unwrap().is_none(), "{step} bytes a read");
        }
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
        pool.put(Vec::new());
        assert_eq!(pool.free_count(), 0, "a buffer that never allocated is not kept");
    }
}
