//! The pipelined client: every call returns a promise at once; a call may
//! name an earlier promise as its target (`$prev`), so a chain of dependent
//! queries leaves in one flight and costs one round trip.

use crate::protocol::{self, ColumnsView, ColumnsWriter, ProtocolError};
use datastore::{Batch, ColumnType, Value};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use zap::rpc::{self, Promise, RpcError};
use zap::Builder;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("{0}")]
    Rpc(#[from] RpcError),
    /// The server answered the call with an error status; `message` is its reason.
    #[error("status {status} ({}): {message}", protocol::status_name(*status))]
    Status { status: u32, message: String },
    #[error("answer: {0}")]
    Protocol(#[from] ProtocolError),
    /// An answer that parsed but is not what the call expects.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
}

/// One socket as both halves of the RPC client.
/// NOTE: not `try_clone`: a clone is a second descriptor, and a load driver
/// holding 10,000 connections must stay under 20,000 open files.
struct Half(Arc<TcpStream>);

impl Read for Half {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        (&*self.0).read(buf)
    }
}

impl Write for Half {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (&*self.0).write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        (&*self.0).flush()
    }
}

/// A query's answer, copied out of its frame (see [`Client::wait`] for the zero-copy view).
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    pub names: Vec<String>,
    pub types: Vec<ColumnType>,
    pub rows: Vec<Vec<Value>>,
}

pub struct Client {
    rpc: rpc::Client<Half, Half>,
    writer: ColumnsWriter,
    builder: Builder,
}

impl Client {
    /// Connects (TCP_NODELAY on: pipelined batches are flushed explicitly).
    pub fn connect(addr: impl ToSocketAddrs + std::fmt::Debug) -> Result<Client, ClientError> {
        let err = |source| ClientError::Connect { addr: format!("{addr:?}"), source };
        let stream = TcpStream::connect(&addr).map_err(err)?;
        stream.set_nodelay(true).map_err(err)?;
        let s = Arc::new(stream);
        let rpc = rpc::Client::new(Half(s.clone()), Half(s));
        Ok(Client { rpc, writer: ColumnsWriter::default(), builder: Builder::new() })
    }

    /// Queues a query; sent with the next `flush` or `wait`.
    pub fn query(&mut self, sql: &str) -> Result<Promise, ClientError> {
        Ok(self.rpc.call(protocol::QUERY, sql.as_bytes())?)
    }

    /// Queues a query whose `$prev` is the first value of `target`'s result;
    /// `target` need not have resolved (or even been sent).
    pub fn query_on(&mut self, target: Promise, sql: &str) -> Result<Promise, ClientError> {
        Ok(self.rpc.call_on(target, protocol::QUERY, sql.as_bytes())?)
    }

    pub fn ping(&mut self) -> Result<Promise, ClientError> {
        Ok(self.rpc.call(protocol::PING, &[])?)
    }

    pub fn stats(&mut self) -> Result<Promise, ClientError> {
        Ok(self.rpc.call(protocol::STATS, &[])?)
    }

    /// The server's sampled heap profile (gzipped pprof), from the sampling build.
    pub fn heap_profile(&mut self) -> Result<Promise, ClientError> {
        Ok(self.rpc.call(protocol::HEAP_PROFILE, &[])?)
    }

    /// Queues an insert of `batch` (columns in `columns`' order) into `table`.
    /// Its answer arrives once the rows are durable.
    pub fn insert(
        &mut self,
        table: &str,
        columns: &[(String, ColumnType)],
        batch: &Batch,
    ) -> Result<Promise, ClientError> {
        let msg = protocol::encode_batch(&mut self.writer, &mut self.builder, table, columns, batch)?;
        Ok(self.rpc.call(protocol::INSERT, msg)?)
    }

    /// Sends every queued call (and queued finishes).
    pub fn flush(&mut self) -> Result<(), ClientError> {
        Ok(self.rpc.flush()?)
    }

    /// Waits for `p`'s answer, read zero-copy; an error status is an error.
    pub fn wait(&mut self, p: Promise) -> Result<ColumnsView<'_>, ClientError> {
        let body = self.ok_body(p)?;
        Ok(ColumnsView::parse(body)?)
    }

    /// Waits for `p`'s answer as text (the `stats` method's JSON).
    pub fn wait_text(&mut self, p: Promise) -> Result<String, ClientError> {
        Ok(String::from_utf8_lossy(self.ok_body(p)?).into_owned())
    }

    /// Waits for `p`'s answer as bytes (the `heap_profile` method's file).
    pub fn wait_bytes(&mut self, p: Promise) -> Result<Vec<u8>, ClientError> {
        Ok(self.ok_body(p)?.to_vec())
    }

    fn ok_body(&mut self, p: Promise) -> Result<&[u8], ClientError> {
        let reply = self.rpc.wait(p)?;
        if !reply.is_ok() {
            let message = String::from_utf8_lossy(reply.body).into_owned();
            return Err(ClientError::Status { status: reply.status, message });
        }
        Ok(reply.body)
    }

    /// Releases `p` here and on the server (sent with the next batch).
    pub fn finish(&mut self, p: Promise) -> Result<(), ClientError> {
        Ok(self.rpc.finish(p)?)
    }

    /// One query, waited for, released: its columns and rows.
    pub fn execute(&mut self, sql: &str) -> Result<Rows, ClientError> {
        let p = self.query(sql)?;
        let out = self.wait(p).and_then(|v| {
            let cols = (0..v.len()).map(|i| v.column(i)).collect::<Result<Vec<_>, _>>()?;
            let names = cols.iter().map(|c| c.name.to_string()).collect();
            let types = cols.iter().map(|c| c.ty).collect();
            Ok(Rows { names, types, rows: v.to_rows()? })
        });
        self.finish(p)?;
        out
    }
}
