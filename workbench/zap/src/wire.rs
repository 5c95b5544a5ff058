//! The header, `parse`, and the bounds-checked struct view every accessor goes through.

use crate::Error;

/// Bytes 0..4 of every message.
pub const MAGIC: [u8; 4] = *b"ZAP\0";
/// Length of the fixed header; the first struct starts here.
pub const HEADER_LEN: usize = 16;
/// The version a builder writes unless told otherwise.
pub const VERSION_1: u16 = 1;
/// Version 2 has the same data segment as version 1; readers accept both.
pub const VERSION_2: u16 = 2;

/// Header flag bits (bytes 6..8). The high byte carries a message type.
pub mod flags {
    pub const COMPRESSED: u16 = 1 << 0;
    pub const ENCRYPTED: u16 = 1 << 1;
    pub const SIGNED: u16 = 1 << 2;
    /// Mask of the message-type byte.
    pub const TYPE_MASK: u16 = 0xff00;
}

#[inline]
pub(crate) fn u16_at(buf: &[u8], pos: usize) -> u16 {
    u16::from_le_bytes(le::<2>(buf, pos))
}

#[inline]
pub(crate) fn u32_at(buf: &[u8], pos: usize) -> u32 {
    u32::from_le_bytes(le::<4>(buf, pos))
}

/// Reads `N` bytes at `pos`, or zeroes when out of range.
///
/// NOTE: callers check bounds before reading; the zero fallback exists so that
/// a logic slip turns into a wrong value rather than a panic on hostile input.
#[inline]
pub(crate) fn le<const N: usize>(buf: &[u8], pos: usize) -> [u8; N] {
    match buf.get(pos..pos.wrapping_add(N)) {
        Some(s) => {
            let mut out = [0u8; N];
            out.copy_from_slice(s);
            out
        }
        None => [0u8; N],
    }
}

/// A validated message: the header checked, the slice cut to the declared size.
#[derive(Clone, Copy, Debug)]
pub struct Message<'a> {
    buf: &'a [u8],
    version: u16,
    flags: u16,
    root: u32,
}

/// Validates the header and returns a borrowed view. Allocates nothing.
///
/// Bytes after the declared size are ignored (a stream may carry more).
// PERF: inlined into `read` (7 % of the vote's decode as a call): the
// header checks fold into the reader's own bounds checks.
#[inline]
pub fn parse(buf: &[u8]) -> Result<Message<'_>, Error> {
    if buf.len() < HEADER_LEN {
        return Err(Error::TooShort { len: buf.len() });
    }
    let magic = le::<4>(buf, 0);
    if magic != MAGIC {
        return Err(Error::BadMagic { found: magic });
    }
    let version = u16_at(buf, 4);
    if version != VERSION_1 && version != VERSION_2 {
        return Err(Error::UnsupportedVersion { version });
    }
    let flags = u16_at(buf, 6);
    if flags & (flags::COMPRESSED | flags::ENCRYPTED) != 0 {
        return Err(Error::UnsupportedFlags { flags });
    }
    let root = u32_at(buf, 8);
    let size = u32_at(buf, 12);
    if (size as usize) < HEADER_LEN || size as usize > buf.len() {
        return Err(Error::BadSize { declared: size, available: buf.len() });
    }
    Ok(Message { buf: &buf[..size as usize], version, flags, root })
}

impl<'a> Message<'a> {
    /// The message bytes, header included, cut to the declared size.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
    pub fn version(&self) -> u16 {
        self.version
    }
    pub fn flags(&self) -> u16 {
        self.flags
    }
    /// The message-type byte carried in the high byte of the flags.
    pub fn message_type(&self) -> u8 {
        (self.flags >> 8) as u8
    }
    /// Absolute offset of the root struct, as declared (checked by [`Message::root_struct`]).
    pub fn root_offset(&self) -> u32 {
        self.root
    }
    /// The root struct as a view of `size` bytes, checked to lie after the header.
    pub fn root_struct(&self, schema: &'static str, size: usize) -> Result<StructReader<'a>, Error> {
        StructReader::new(self.buf, self.root as usize, size, schema)
    }
    /// The root struct as a typed reader.
    pub fn root<T: crate::Schema>(&self) -> Result<T::Reader<'a>, Error> {
        Ok(T::reader(self.root_struct(T::NAME, T::SIZE)?))
    }
}

/// A bounds-checked view of one struct inside a message.
///
/// Construction checks that the whole fixed section lies inside the message,
/// so scalar reads need no error path; pointer reads check their target.
#[derive(Clone, Copy, Debug)]
pub struct StructReader<'a> {
    msg: &'a [u8],
    pos: usize,
    size: usize,
}

impl<'a> StructReader<'a> {
    pub(crate) fn new(msg: &'a [u8], pos: usize, size: usize, schema: &'static str) -> Result<Self, Error> {
        let fits = pos >= HEADER_LEN && pos.checked_add(size).is_some_and(|end| end <= msg.len());
        if !fits {
            return Err(Error::StructOutOfBounds { schema, pos, size, msg_len: msg.len() });
        }
        Ok(StructReader { msg, pos, size })
    }

    /// Absolute offset of this struct in the message.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Fixed-section bytes of this struct.
    pub fn fixed(&self) -> &'a [u8] {
        &self.msg[self.pos..self.pos + self.size]
    }

    /// `N` bytes at offset `off` of the fixed section (zeroes past its end).
    #[inline]
    pub fn scalar<const N: usize>(&self, off: usize) -> [u8; N] {
        if off + N > self.size {
            return [0u8; N];
        }
        le::<N>(self.msg, self.pos + off)
    }

    /// An inline byte array at `off`; all zeroes if it would overrun the struct.
    #[inline]
    pub fn array<const N: usize>(&self, off: usize) -> &'a [u8; N] {
        const { assert!(N <= MAX_INLINE_ARRAY) };
        let inside = off.checked_add(N).is_some_and(|end| end <= self.size);
        let msg: &'a [u8] = self.msg;
        let found: Option<&'a [u8; N]> =
            if inside { msg.get(self.pos + off..).and_then(|s| s.first_chunk::<N>()) } else { None };
        match found {
            Some(a) => a,
            None => zero_array::<N>(),
        }
    }

    /// Reads the `{rel: u32, len: u32}` slot at `off` and returns the absolute
    /// range it points at, `elem` bytes per element. `Ok(None)` for a null pointer.
    #[inline]
    pub fn slot_range(&self, off: usize, elem: usize, field: &'static str) -> Result<Option<(usize, usize)>, Error> {
        if off + 8 > self.size {
            return Ok(None);
        }
        let slot = self.pos + off;
        let rel = u32_at(self.msg, slot) as usize;
        if rel == 0 {
            return Ok(None);
        }
        let count = u32_at(self.msg, slot + 4) as usize;
        let target = slot + rel;
        let len = count.saturating_mul(elem);
        match target.checked_add(len) {
            Some(end) if end <= self.msg.len() => Ok(Some((target, len))),
            _ => Err(Error::PointerOutOfBounds { field, slot, target, len, msg_len: self.msg.len() }),
        }
    }

    /// The bytes a `{rel, len}` slot points at; empty for a null pointer.
    /// No UTF-8 check: this is the unchecked accessor for text fields too.
    // PERF: inlined (8 % of the vote's decode at 64 B as a call): with the
    // slot's offset known, its bounds checks fold into one compare.
    #[inline]
    pub fn bytes(&self, off: usize, field: &'static str) -> Result<&'a [u8], Error> {
        Ok(match self.slot_range(off, 1, field)? {
            Some((start, len)) => &self.msg[start..start + len],
            None => &[],
        })
    }

    /// A text slot, UTF-8 validated; empty for a null pointer.
    pub fn text(&self, off: usize, field: &'static str) -> Result<&'a str, Error> {
        let raw = self.bytes(off, field)?;
        std::str::from_utf8(raw).map_err(|e| Error::InvalidUtf8 { field, valid_up_to: e.valid_up_to() })
    }

    /// A nested struct behind the 4-byte self-relative pointer at `off`.
    pub fn child(&self, off: usize, schema: &'static str, size: usize) -> Result<Option<StructReader<'a>>, Error> {
        if off + 4 > self.size {
            return Ok(None);
        }
        let slot = self.pos + off;
        let rel = u32_at(self.msg, slot) as usize;
        if rel == 0 {
            return Ok(None);
        }
        StructReader::new(self.msg, slot + rel, size, schema).map(Some)
    }
}

/// Largest inline byte array a schema may declare.
pub const MAX_INLINE_ARRAY: usize = 4096;
static ZEROES: [u8; MAX_INLINE_ARRAY] = [0; MAX_INLINE_ARRAY];

fn zero_array<const N: usize>() -> &'static [u8; N] {
    // NOTE: N <= MAX_INLINE_ARRAY is asserted at compile time by every caller.
    ZEROES.first_chunk::<N>().expect("inline array bound checked at compile time")
}

impl<'a> StructReader<'a> {
    /// The whole message this struct lives in.
    pub fn message_bytes(&self) -> &'a [u8] {
        self.msg
    }
}
