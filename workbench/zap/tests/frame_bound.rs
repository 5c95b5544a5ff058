//! The frame limit holds to the byte on every read path: a stream that
//! announces a frame of the maximum length makes no path hold a buffer
//! larger than `max + READER_SLACK`, and one byte more is refused before
//! anything of its size is reserved. The paths: [`FrameReader`],
//! [`decode_frame`], a server's `serve`, a client's `wait`.

mod one_test;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{self, Read};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use zap::frame::{decode_frame, FrameError, FrameReader, PREFIX_LEN, READER_SLACK, READ_AHEAD};
use zap::rpc::{Client, Dispatcher, Limits, RpcError, ServerConn};

/// Counts live bytes, their peak and the largest block since [`Window::open`].
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

fn grew(size: usize) {
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
    LARGEST.fetch_max(size, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_sub(l.size(), Relaxed);
        grew(new);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// What a path held while it ran: its peak above the bytes live before it,
/// and its largest single block.
#[derive(Debug)]
struct Held {
    peak: usize,
    largest: usize,
}

fn holding<T>(f: impl FnOnce() -> T) -> (T, Held) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    LARGEST.store(0, Relaxed);
    let out = f();
    (out, Held { peak: PEAK.load(Relaxed) - base, largest: LARGEST.load(Relaxed) })
}

/// A stream of frames made up as it is read (so the input costs no heap):
/// each announced length, then `body` bytes of 0xff (no valid request).
struct Frames {
    /// (announced length, body bytes that follow)
    frames: Vec<(u32, usize)>,
    at: usize,
    offset: usize,
}

impl Frames {
    fn new(frames: &[(usize, usize)]) -> Self {
        let frames = frames.iter().map(|&(len, body)| (len as u32, body)).collect();
        Frames { frames, at: 0, offset: 0 }
    }
}

impl Read for Frames {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(&(len, body)) = self.frames.get(self.at) else { return Ok(0) };
        let prefix = len.to_le_bytes();
        let n = if self.offset < PREFIX_LEN {
            let n = (PREFIX_LEN - self.offset).min(buf.len());
            buf[..n].copy_from_slice(&prefix[self.offset..self.offset + n]);
            n
        } else {
            let n = (PREFIX_LEN + body - self.offset).min(buf.len());
            buf[..n].fill(0xff);
            n
        };
        self.offset += n;
        if self.offset == PREFIX_LEN + body {
            (self.at, self.offset) = (self.at + 1, 0);
        }
        Ok(n)
    }
}

/// Small enough to run fast, large enough that the reader grows in chunks.
const MAX: usize = 1 << 20;

/// The most a path may hold for a frame it refuses: its read-ahead.
const REFUSED: usize = READ_AHEAD + READER_SLACK;

fn check(path: &str, held: &Held, bound: usize) {
    check_beside(path, held, bound, 0);
}

/// `beside`: what the path holds apart from its frame buffer (an answer),
/// measured on a small frame.
fn check_beside(path: &str, held: &Held, bound: usize, beside: usize) {
    println!("{path}: largest block {} B, peak {} B (bound {bound} B + {beside} B beside)", held.largest, held.peak);
    assert!(held.largest <= bound, "{path}: a block of {} B, over the bound of {bound} B", held.largest);
    let most = bound + beside;
    assert!(held.peak <= most, "{path}: {} B live at the peak, over {bound} + {beside} B", held.peak);
}

fn reader(frames: &[(usize, usize)], max: usize) -> (Result<usize, FrameError>, Held) {
    let mut r = FrameReader::with_max(Frames::new(frames), max);
    holding(move || {
        let mut n = 0;
        while let Some(body) = r.read_frame()? {
            assert!(body.iter().all(|&b| b == 0xff));
            n += 1;
        }
        Ok(n)
    })
}

fn frame_reader_holds_the_limit_to_the_byte() {
    for max in [MAX, zap::frame::DEFAULT_MAX_FRAME] {
        let (n, held) = reader(&[(max, max), (max, max)], max);
        assert_eq!(n.unwrap(), 2);
        check("FrameReader, two frames at the limit", &held, max + READER_SLACK);
        // The stream of the report: a frame one byte short, then the
        // prefix of a frame at the limit, cut.
        let (end, held) = reader(&[(max - 1, max - 1), (max, 0)], max);
        assert!(matches!(end, Err(FrameError::Truncated { len, got: 0 }) if len == max), "{end:?}");
        check("FrameReader, limit - 1 then a cut prefix", &held, max + READER_SLACK);

        let (end, held) = reader(&[(max + 1, max + 1)], max);
        assert!(matches!(end, Err(FrameError::TooLarge { len, .. }) if len == max + 1), "{end:?}");
        check("FrameReader, one byte over", &held, REFUSED);
    }
}

fn decode_frame_allocates_nothing() {
    let mut wire = (MAX as u32).to_le_bytes().to_vec();
    wire.resize(PREFIX_LEN + MAX, 0xff);
    let (got, held) = holding(|| decode_frame(&wire, MAX).map(|f| f.map(|(body, used)| (body.len(), used))));
    assert_eq!(got.unwrap(), Some((MAX, PREFIX_LEN + MAX)));
    assert_eq!((held.peak, held.largest), (0, 0), "decode_frame at the limit allocated");
    wire[..PREFIX_LEN].copy_from_slice(&(MAX as u32 + 1).to_le_bytes());
    let (got, held) = holding(|| decode_frame(&wire, MAX).map(|f| f.is_some()));
    assert!(matches!(got, Err(FrameError::TooLarge { len, max }) if len == MAX + 1 && max == MAX));
    assert_eq!((held.peak, held.largest), (0, 0), "decode_frame one byte over allocated");
}

fn serve_holds_the_limit_to_the_byte() {
    let d = Dispatcher::new();
    let limits = Limits { max_frame: MAX, ..Limits::default() };
    let mut conn = ServerConn::new(limits);
    // Answering a malformed call (its error answer, the writer's buffer),
    // measured beside a small frame's read-ahead buffer.
    let (served, small) = holding(|| conn.serve(&d, Frames::new(&[(16, 16), (16, 16)]), io::sink()));
    assert_eq!(served.unwrap(), 2);
    let answering = small.peak.saturating_sub(READ_AHEAD + READER_SLACK);
    assert!(answering < 4096, "answering a malformed call held {answering} B");
    let (served, held) = holding(|| conn.serve(&d, Frames::new(&[(MAX, MAX), (MAX - 1, MAX - 1)]), io::sink()));
    assert_eq!(served.unwrap(), 2);
    check_beside("serve, frames at the limit", &held, MAX + READER_SLACK, answering);
    let (end, held) = holding(|| conn.serve(&d, Frames::new(&[(MAX + 1, MAX + 1)]), io::sink()));
    assert!(matches!(end, Err(FrameError::TooLarge { .. })), "{end:?}");
    check_beside("serve, one byte over", &held, REFUSED, answering);
}

fn client_holds_the_limit_to_the_byte() {
    let limits = Limits { max_frame: MAX, ..Limits::default() };
    for (len, over) in [(MAX, false), (MAX + 1, true)] {
        let mut client = Client::with_limits(Frames::new(&[(len, len)]), io::sink(), limits);
        let p = client.call(1, b"ping").unwrap();
        client.flush().unwrap();
        let (reply, held) = holding(|| client.wait(p).map(|_| ()));
        match over {
            // A malformed answer at the limit is read whole, then refused.
            false => {
                assert!(!matches!(reply, Err(RpcError::Frame(_))), "{reply:?}");
                check("client, an answer at the limit", &held, MAX + READER_SLACK);
            }
            true => {
                assert!(matches!(reply, Err(RpcError::Frame(FrameError::TooLarge { .. }))), "{reply:?}");
                check("client, one byte over", &held, REFUSED);
            }
        }
    }
}

// No libtest harness (Cargo.toml: `harness = false`): the counter sees
// every thread of the process, and the harness's own thread allocates.
fn main() {
    one_test::run("frame_limit_holds_to_the_byte_on_every_read_path", || {
        frame_reader_holds_the_limit_to_the_byte();
        decode_frame_allocates_nothing();
        serve_holds_the_limit_to_the_byte();
        client_holds_the_limit_to_the_byte();
    });
}
