//! The body of the fuzz target, kept in the library so that the committed
//! seed corpus also runs as an ordinary test (`tests/fuzz_corpus.rs`).

use crate::frame::{decode_frame, FrameReader};
use crate::messages::{Request, Response, Vote};
use crate::parse;

/// Parses `data` as a message and as a stream of frames and reads every
/// field of every schema through every accessor. Must never panic.
/// Returns how many fields were read successfully (so the work is not optimised away).
pub fn exercise(data: &[u8]) -> usize {
    let mut ok = read_all(data);
    let mut rest = data;
    while let Ok(Some((body, used))) = decode_frame(rest, 1 << 16) {
        ok += read_all(body);
        rest = &rest[used..];
    }
    let mut reader = FrameReader::with_max(data, 1 << 16);
    while let Ok(Some(frame)) = reader.read_frame() {
        ok += frame.len().min(1);
    }
    ok
}

/// `parse` and every accessor of every schema on `data`; allocation-free.
pub fn read_all(data: &[u8]) -> usize {
    let Ok(msg) = parse(data) else { return 0 };
    let mut ok = usize::from(msg.version() > 0) + usize::from(msg.message_type() == 0);
    if let Ok(v) = msg.root::<Vote>() {
        ok += (v.round() as usize & 1) + (v.timestamp() as usize & 1) + v.vote_type() as usize;
        ok += (v.block_hash()[0] ^ v.voter_id()[31] ^ v.signature()[63]) as usize;
        ok += v.payload().map_or(0, |p| p.len());
        let s = v.as_struct();
        ok += s.text(Vote::payload, "payload").map_or(0, str::len);
        ok += s.child(Vote::round, "Vote", 160).ok().flatten().map_or(0, |c| c.position());
        ok += s.slot_range(Vote::payload, 8, "payload").ok().flatten().map_or(0, |(a, b)| a ^ b);
    }
    if let Ok(r) = msg.root::<Request>() {
        ok += (r.method() ^ r.promise() ^ r.target()) as usize & 1;
        ok += r.capability().map_or(0, |c| c.len()) + r.payload().map_or(0, |p| p.len());
    }
    if let Ok(r) = msg.root::<Response>() {
        ok += (r.status() ^ r.promise() ^ r.reserved()) as usize & 1;
        ok += r.body().map_or(0, |b| b.len());
    }
    ok
}
