//! Helpers shared by the server's integration tests: a scratch data
//! directory, raw frames in and out.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;
use zap::frame::FrameReader;
use zap::Response;

/// A fresh data directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("server-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One request envelope, framed (the fuzz target's framing, which any client writes).
pub use server::fuzzing::frame;

/// A raw connection: bytes in, decoded responses out.
pub struct Raw {
    pub reader: FrameReader<TcpStream>,
    pub stream: TcpStream,
}

impl Raw {
    pub fn connect(addr: std::net::SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Raw { reader: FrameReader::new(stream.try_clone().unwrap()), stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next response: (status, promise, body as text).
    pub fn recv(&mut self) -> Option<(u32, u32, Vec<u8>)> {
        let f = self.reader.read_frame().ok()??;
        let r = zap::read::<Response>(f).unwrap();
        Some((r.status(), r.promise(), r.body().unwrap().to_vec()))
    }

    pub fn call(&mut self, method: u32, promise: u32, target: u32, payload: &[u8]) -> (u32, u32, Vec<u8>) {
        self.send(&frame(method, promise, target, payload));
        self.recv().expect("a response")
    }

    /// Whether the server closed the connection (reads end of stream).
    pub fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0) | Err(_))
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
