//! Building messages into a reusable buffer or a caller's slice.

use crate::wire::{HEADER_LEN, MAGIC, VERSION_1};
use crate::{Error, Schema};

/// Where a builder writes. `Vec<u8>` grows; [`SliceStorage`] fails with
/// [`Error::BufferFull`] at its end.
pub trait Storage {
    fn as_slice(&self) -> &[u8];
    fn as_mut_slice(&mut self) -> &mut [u8];
    /// Empties the storage. PERF: must keep capacity, or reuse allocates.
    fn clear(&mut self);
    /// Appends `n` zero bytes; false when there is no room.
    fn extend_zeroed(&mut self, n: usize) -> bool;
    /// Appends `data`; false when there is no room.
    fn extend_from(&mut self, data: &[u8]) -> bool;
    /// Total room, for error messages.
    fn capacity(&self) -> usize;
    /// Shortens the storage to `len` bytes (no-op when shorter), keeping
    /// what the kept bytes hold: a typed root reuses them unzeroed.
    fn truncate(&mut self, len: usize);
}

impl Storage for Vec<u8> {
    fn as_slice(&self) -> &[u8] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self
    }
    fn clear(&mut self) {
        Vec::clear(self)
    }
    // PERF: inlined, so that a root's reservation (a constant: header plus
    // the struct's fixed size) is a few vector stores, not a call to a
    // memcpy of unknown length: perf put this call at 9 % of the vote's
    // encode, whose whole cost was 3.7× a memcpy of the same bytes.
    #[inline]
    fn extend_zeroed(&mut self, n: usize) -> bool {
        // PERF: `resize` wrote the zeros a byte at a time (callgrind: a third
        // of encoding a one-row answer); the padding and fixed sections a
        // builder reserves are short, and a copy from zeros is one memcpy.
        const ZEROS: [u8; 256] = [0; 256];
        match ZEROS.get(..n) {
            Some(z) => self.extend_from_slice(z),
            None => self.resize(self.len() + n, 0),
        }
        true
    }
    #[inline]
    fn extend_from(&mut self, data: &[u8]) -> bool {
        self.extend_from_slice(data);
        true
    }
    fn capacity(&self) -> usize {
        usize::MAX
    }
    #[inline]
    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len)
    }
}

/// A caller-provided slice used as build storage: never allocates.
pub struct SliceStorage<'s> {
    buf: &'s mut [u8],
    len: usize,
}

impl Storage for SliceStorage<'_> {
    fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
    fn clear(&mut self) {
        self.len = 0;
    }
    fn extend_zeroed(&mut self, n: usize) -> bool {
        match self.buf.get_mut(self.len..self.len.saturating_add(n)) {
            Some(s) => {
                s.fill(0);
                self.len += n;
                true
            }
            None => false,
        }
    }
    fn extend_from(&mut self, data: &[u8]) -> bool {
        match self.buf.get_mut(self.len..self.len.saturating_add(data.len())) {
            Some(s) => {
                s.copy_from_slice(data);
                self.len += data.len();
                true
            }
            None => false,
        }
    }
    fn capacity(&self) -> usize {
        self.buf.len()
    }
    #[inline]
    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

/// Builds one message at a time into its storage.
///
/// PERF: [`Builder::root`] clears the storage but keeps its capacity, so once
/// a message of a given shape has been built, building another of the same
/// shape performs no allocation. Errors (only possible over a slice) are
/// sticky and reported by `finish`.
///
/// PERF: a typed root ([`Builder::root`]) whose header and fixed section fit
/// in the previous message's bytes reuses them without zeroing them first;
/// `finish` then zeroes what this message did not write (the padding between
/// fields, and every field no setter was called for), which the setters
/// record in a mask the compiler folds to a constant. Zeroing the vote's
/// 176 bytes before writing 145 of them again made two passes of stores over
/// the same lines where a memcpy of the message makes one: without it the
/// encode went 5.6 → 5.0 ns at 0 B and 7.9 → 6.5 ns at 64 B (codec-speed's
/// rounds, 3 processes, system allocator, x86-64-v3; 2.4× → 2.0× a memcpy
/// of the 240-byte message). It depends
/// on the builder being reused for messages at least as long; a first
/// message, a longer one, an untyped root and a nested struct are zeroed
/// when reserved, as before. What a setter wrote is known to the typed
/// builder alone (a local mask, which the compiler folds), so a typed root
/// must end in its own `finish`: [`Builder::finish`] after one was dropped
/// unfinished is [`Error::RootUnfinished`], not a message holding stale bytes.
pub struct Builder<S: Storage = Vec<u8>> {
    buf: S,
    version: u16,
    flags: u16,
    error: Option<Error>,
    /// The root's schema while its fixed section holds the previous
    /// message's bytes, until its typed `finish` zeroes what it did not write.
    unsealed: Option<&'static str>,
}

impl Default for Builder<Vec<u8>> {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder<Vec<u8>> {
    pub fn new() -> Self {
        Self::with_capacity(0)
    }
    /// A builder whose first message of up to `cap` bytes allocates once, here.
    pub fn with_capacity(cap: usize) -> Self {
        Builder { buf: Vec::with_capacity(cap), version: VERSION_1, flags: 0, error: None, unsealed: None }
    }
}

impl<'s> Builder<SliceStorage<'s>> {
    /// A builder writing into `buf`; it never allocates.
    pub fn over(buf: &'s mut [u8]) -> Self {
        Builder { buf: SliceStorage { buf, len: 0 }, version: VERSION_1, flags: 0, error: None, unsealed: None }
    }
}

impl<S: Storage> Builder<S> {
    /// Version to write in the header (1 unless asked; 2 has the same data segment).
    pub fn set_version(&mut self, version: u16) -> &mut Self {
        self.version = version;
        self
    }
    /// Flags to write in the header; the high byte is the message type.
    pub fn set_flags(&mut self, flags: u16) -> &mut Self {
        self.flags = flags;
        self
    }

    /// Starts a new message whose root is a `T`, discarding the previous one.
    #[inline]
    pub fn root<T: Schema>(&mut self) -> T::Builder<'_, S> {
        let n = HEADER_LEN + T::SIZE;
        let pos = if T::FIELDS.len() <= 64 && self.buf.as_slice().len() >= n {
            self.error = None;
            self.buf.truncate(n);
            self.unsealed = Some(T::NAME);
            HEADER_LEN
        } else {
            self.start_root(T::SIZE)
        };
        T::builder(StructBuilder { b: self, pos, size: T::SIZE, fields: T::FIELDS, set: 0 })
    }

    /// Starts a new message with an untyped root struct of `size` bytes.
    pub fn root_struct(&mut self, size: usize) -> StructBuilder<'_, S> {
        let pos = self.start_root(size);
        StructBuilder { b: self, pos, size, fields: &[], set: 0 }
    }

    #[inline]
    fn start_root(&mut self, size: usize) -> usize {
        self.buf.clear();
        self.error = None;
        self.unsealed = None;
        self.reserve(HEADER_LEN + size);
        HEADER_LEN
    }

    fn fail_full(&mut self, extra: usize) {
        if self.error.is_none() {
            let needed = self.buf.as_slice().len().saturating_add(extra);
            self.error = Some(Error::BufferFull { needed, capacity: self.buf.capacity() });
        }
    }

    #[inline]
    fn reserve(&mut self, n: usize) -> Option<usize> {
        let at = self.buf.as_slice().len();
        if self.buf.extend_zeroed(n) {
            Some(at)
        } else {
            self.fail_full(n);
            None
        }
    }

    fn pad_to(&mut self, align: usize) -> Option<()> {
        let len = self.buf.as_slice().len();
        let pad = len.next_multiple_of(align) - len;
        if pad > 0 {
            self.reserve(pad)?;
        }
        Some(())
    }

    /// Appends `data` aligned to `align`; the absolute position, or None when full.
    fn append(&mut self, data: &[u8], align: usize) -> Option<usize> {
        self.pad_to(align)?;
        let at = self.buf.as_slice().len();
        if self.buf.extend_from(data) {
            Some(at)
        } else {
            self.fail_full(data.len());
            None
        }
    }

    #[inline]
    fn write_at(&mut self, pos: usize, data: &[u8]) {
        if let Some(dst) = self.buf.as_mut_slice().get_mut(pos..pos + data.len()) {
            dst.copy_from_slice(data);
        }
    }

    /// Zeroes the bytes of a reused root's fixed section that this message
    /// did not write: the gaps between `fields` (offset, size), and each
    /// field whose bit is not in `set`.
    #[inline]
    fn seal(&mut self, fields: &[(usize, usize)], size: usize, set: u64) {
        self.unsealed = None;
        let mut end = 0;
        for (i, &(off, len)) in fields.iter().enumerate() {
            if off > end {
                self.zero(end, off - end);
            }
            if i >= 64 || set & (1 << i) == 0 {
                self.zero(off, len);
            }
            end = off + len;
        }
        if size > end {
            self.zero(end, size - end);
        }
    }

    #[inline]
    fn zero(&mut self, off: usize, len: usize) {
        let at = HEADER_LEN + off;
        if let Some(dst) = self.buf.as_mut_slice().get_mut(at..at + len) {
            dst.fill(0);
        }
    }

    /// Writes the header and returns the finished message.
    #[inline]
    pub fn finish(&mut self) -> Result<&[u8], Error> {
        if let Some(schema) = self.unsealed {
            return Err(Error::RootUnfinished { schema });
        }
        if let Some(e) = self.error {
            return Err(e);
        }
        let len = self.buf.as_slice().len();
        let size = u32::try_from(len).map_err(|_| Error::MessageTooLarge { len })?;
        let mut header = [0u8; HEADER_LEN];
        header[0..4].copy_from_slice(&MAGIC);
        header[4..6].copy_from_slice(&self.version.to_le_bytes());
        header[6..8].copy_from_slice(&self.flags.to_le_bytes());
        header[8..12].copy_from_slice(&(HEADER_LEN as u32).to_le_bytes());
        header[12..16].copy_from_slice(&size.to_le_bytes());
        self.write_at(0, &header);
        Ok(self.buf.as_slice())
    }
}

/// The bit a builder records field `off` of `fields` by (`1 << i`; 0 past
/// the 64th field, whose struct is zeroed when reserved instead).
const fn field_bit(fields: &[(usize, usize)], off: usize) -> u64 {
    let mut i = 0;
    while i < fields.len() && i < 64 {
        if fields[i].0 == off {
            return 1 << i;
        }
        i += 1;
    }
    0
}

/// Writes the fields of one struct. Generated builders wrap this.
pub struct StructBuilder<'b, S: Storage> {
    b: &'b mut Builder<S>,
    pos: usize,
    size: usize,
    /// The struct's fields (offset, size), to record which were written;
    /// empty for an untyped or nested struct, whose bytes were zeroed.
    fields: &'static [(usize, usize)],
    /// Bit `i` set once `fields[i]` was written.
    set: u64,
}

impl<'b, S: Storage> StructBuilder<'b, S> {
    /// Records that the field at `off` was written (a constant, once inlined).
    #[inline]
    fn mark(&mut self, off: usize) {
        self.set |= field_bit(self.fields, off);
    }

    /// Writes a little-endian scalar at offset `off` of the fixed section.
    #[inline]
    pub fn set_scalar<const N: usize>(&mut self, off: usize, le: [u8; N]) {
        debug_assert!(off + N <= self.size, "scalar past struct end");
        self.mark(off);
        self.b.write_at(self.pos + off, &le);
    }

    /// Copies an inline byte array into the fixed section.
    #[inline]
    pub fn set_array(&mut self, off: usize, data: &[u8]) {
        debug_assert!(off + data.len() <= self.size, "array past struct end");
        self.mark(off);
        self.b.write_at(self.pos + off, data);
    }

    fn set_slot(&mut self, off: usize, target: usize, count: usize) {
        self.mark(off);
        let slot = self.pos + off;
        let (Ok(rel), Ok(count)) = (u32::try_from(target - slot), u32::try_from(count)) else {
            self.b.error.get_or_insert(Error::MessageTooLarge { len: target.saturating_add(count) });
            return;
        };
        self.b.write_at(slot, &rel.to_le_bytes());
        self.b.write_at(slot + 4, &count.to_le_bytes());
    }

    /// Appends `data` (copied once, here) and points the `{rel, len}` slot at `off` to it.
    /// `align` is the element alignment, `count` the element count written in the slot.
    // PERF: inlined (7 % of the vote's encode as a call), so an empty value
    // is one store of a null slot at a known offset.
    #[inline]
    pub fn set_var(&mut self, off: usize, data: &[u8], align: usize, count: usize) {
        if data.is_empty() {
            // NOTE: an empty value is written as a null pointer; readers give
            // back an empty slice either way.
            self.set_slot_null(off);
            return;
        }
        if let Some(at) = self.b.append(data, align) {
            self.set_slot(off, at, count);
        }
    }

    fn set_slot_null(&mut self, off: usize) {
        self.mark(off);
        self.b.write_at(self.pos + off, &[0u8; 8]);
    }

    /// Appends a list of `count` elements of `elem` bytes each, written by `fill`
    /// in place, and points the slot at `off` to it.
    pub fn set_list_with(&mut self, off: usize, elem: usize, count: usize, fill: impl FnOnce(&mut [u8])) {
        if count == 0 {
            self.set_slot_null(off);
            return;
        }
        if self.b.pad_to(elem.max(1)).is_none() {
            return;
        }
        let len = elem * count;
        let Some(at) = self.b.reserve(len) else {
            return;
        };
        if let Some(dst) = self.b.buf.as_mut_slice().get_mut(at..at + len) {
            fill(dst);
        }
        self.set_slot(off, at, count);
    }

    /// Appends a zeroed nested struct of `size` bytes (8-aligned), points the
    /// 4-byte slot at `off` to it, and returns a builder for it.
    pub fn child(&mut self, off: usize, size: usize) -> StructBuilder<'_, S> {
        self.mark(off);
        let slot = self.pos + off;
        let pos = match self.b.pad_to(8).and_then(|_| self.b.reserve(size)) {
            Some(at) => {
                match u32::try_from(at - slot) {
                    Ok(rel) => self.b.write_at(slot, &rel.to_le_bytes()),
                    Err(_) => {
                        self.b.error.get_or_insert(Error::MessageTooLarge { len: at });
                    }
                }
                at
            }
            // A full slice: writes to the child fall outside the storage and are dropped;
            // `finish` reports the error.
            None => usize::MAX / 2,
        };
        StructBuilder { b: self.b, pos, size, fields: &[], set: 0 }
    }

    /// Zeroes what a reused root still holds of the previous message (see
    /// [`Builder`]), writes the header and returns the finished message.
    #[inline]
    pub fn finish(self) -> Result<&'b [u8], Error> {
        if self.pos == HEADER_LEN && self.b.unsealed.is_some() {
            self.b.seal(self.fields, self.size, self.set);
        }
        self.b.finish()
    }
}
