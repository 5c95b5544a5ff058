//! An in-memory byte pipe for tests and in-process measurements: no sockets,
//! so allocation counts see only the protocol's own work.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::rc::Rc;

/// One direction of an in-memory stream. Clones share the same buffer:
/// give one clone to the writer and one to the reader.
///
/// NOTE: reading an empty pipe returns 0 bytes, i.e. end of stream; this is
/// what lets a single thread drive client and server in turn.
#[derive(Clone, Default)]
pub struct MemPipe {
    buf: Rc<RefCell<VecDeque<u8>>>,
}

impl MemPipe {
    pub fn new() -> Self {
        Self::default()
    }
    /// A pipe whose buffer holds `cap` bytes before it first grows.
    pub fn with_capacity(cap: usize) -> Self {
        MemPipe { buf: Rc::new(RefCell::new(VecDeque::with_capacity(cap))) }
    }
    /// Bytes written and not yet read.
    pub fn len(&self) -> usize {
        self.buf.borrow().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Read for MemPipe {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.buf.borrow_mut().read(out)
    }
}

impl Write for MemPipe {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.borrow_mut().extend(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
