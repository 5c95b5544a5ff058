//! Typed errors for reading, building and framing ZAP messages.

use std::fmt;

/// What is wrong with a message or a build. Every variant names the field,
/// offset or length at fault so a researcher can find the byte in a hex dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the 16-byte header.
    TooShort { len: usize },
    /// Bytes 0..4 are not `"ZAP\0"`.
    BadMagic { found: [u8; 4] },
    /// Bytes 4..6 name a version this reader does not know.
    UnsupportedVersion { version: u16 },
    /// The header sets a flag whose data this reader cannot interpret
    /// (compressed or encrypted segments).
    UnsupportedFlags { flags: u16 },
    /// The size in bytes 12..16 is below the header or above the buffer.
    BadSize { declared: u32, available: usize },
    /// A struct (the root, or a nested one) does not fit inside the message.
    StructOutOfBounds { schema: &'static str, pos: usize, size: usize, msg_len: usize },
    /// A pointer slot of `field` leads outside the message.
    PointerOutOfBounds { field: &'static str, slot: usize, target: usize, len: usize, msg_len: usize },
    /// A text field is not UTF-8; `valid_up_to` is the byte where it stops being so.
    InvalidUtf8 { field: &'static str, valid_up_to: usize },
    /// A builder over a caller-provided slice ran out of room.
    BufferFull { needed: usize, capacity: usize },
    /// A message grew past the 4 GiB that u32 offsets can address.
    MessageTooLarge { len: usize },
    /// [`Builder::finish`](crate::Builder::finish) after a typed root was
    /// dropped before its own `finish`: its fixed section may still hold
    /// the previous message's bytes where no setter wrote.
    RootUnfinished { schema: &'static str },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::TooShort { len } => write!(f, "message of {len} bytes is shorter than the 16-byte ZAP header"),
            Error::BadMagic { found } => write!(f, "bad magic at bytes 0..4: {found:02x?}, expected \"ZAP\\0\""),
            Error::UnsupportedVersion { version } => write!(f, "unsupported ZAP version {version} at bytes 4..6 (known: 1, 2)"),
            Error::UnsupportedFlags { flags } => {
                write!(f, "header flags {flags:#06x} at bytes 6..8 ask for compressed or encrypted data, which this reader does not decode")
            }
            Error::BadSize { declared, available } => {
                write!(f, "declared size {declared} at bytes 12..16 is outside 16..={available} (the buffer length)")
            }
            Error::StructOutOfBounds { schema, pos, size, msg_len } => {
                write!(f, "struct {schema} at offset {pos} of {size} bytes runs past the message end ({msg_len})")
            }
            Error::PointerOutOfBounds { field, slot, target, len, msg_len } => write!(
                f,
                "field `{field}`: pointer in slot at offset {slot} leads to {target}..{} past the message end ({msg_len})",
                target.saturating_add(len)
            ),
            Error::InvalidUtf8 { field, valid_up_to } => {
                write!(f, "field `{field}`: text is not UTF-8 after byte {valid_up_to}")
            }
            Error::BufferFull { needed, capacity } => {
                write!(f, "builder needs {needed} bytes but the caller's buffer holds {capacity}")
            }
            Error::MessageTooLarge { len } => write!(f, "message of {len} bytes exceeds the u32 offsets of the format"),
            Error::RootUnfinished { schema } => write!(
                f,
                "the root {schema} was dropped before its own finish, so which of its fields were written is unknown; end it with its finish"
            ),
        }
    }
}

impl std::error::Error for Error {}
