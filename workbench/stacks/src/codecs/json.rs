//! JSON-RPC 2.0 with serde_json, two rows, byte fields as hex strings, the
//! vote as `params` of a request and `result` of a response, serialized into
//! a reused buffer. `json-rpc`: as its users write it, owned `String` fields
//! in derived structs. `json-rpc-borrowed`: serde's documented zero-copy
//! idiom, deserializing into structs that borrow `&str` from the input
//! (`#[serde(borrow)]`), and serializing the hex through `collect_str`
//! without building a `String` per field.

use super::{Codec, Envelope};
use crate::vote::VoteData;
use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct VoteJson {
    round: u64,
    block_hash: String,
    voter_id: String,
    signature: String,
    timestamp: u64,
    vote_type: u8,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    payload: String,
}

#[derive(Serialize)]
struct RequestOut<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: &'a VoteJson,
    id: u64,
}

#[derive(Serialize)]
struct ResponseOut<'a> {
    jsonrpc: &'static str,
    result: &'a VoteJson,
    id: u64,
}

#[derive(Deserialize)]
struct RequestIn {
    jsonrpc: String,
    method: String,
    params: VoteJson,
    id: u64,
}

#[derive(Deserialize)]
struct ResponseIn {
    jsonrpc: String,
    result: VoteJson,
    id: u64,
}

pub struct JsonRpc {
    buf: Vec<u8>,
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Compares a hex string to bytes without decoding into a new buffer.
fn hex_eq(field: &str, hex: &str, bytes: &[u8]) -> Result<()> {
    ensure!(hex.len() == bytes.len() * 2, "{field}: {} hex digits for {} bytes", hex.len(), bytes.len());
    let nib = |c: u8| -> Result<u8> {
        Ok(match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => bail!("{field}: not a hex digit: {:?}", c as char),
        })
    };
    for (pair, b) in hex.as_bytes().chunks_exact(2).zip(bytes) {
        ensure!((nib(pair[0])? << 4 | nib(pair[1])?) == *b, "{field} differs");
    }
    Ok(())
}

impl VoteJson {
    fn from_data(v: &VoteData) -> Self {
        VoteJson {
            round: v.round,
            block_hash: to_hex(&v.block_hash),
            voter_id: to_hex(&v.voter_id),
            signature: to_hex(&v.signature),
            timestamp: v.timestamp,
            vote_type: v.vote_type,
            payload: to_hex(&v.payload),
        }
    }

    fn check(&self, e: &VoteData) -> Result<()> {
        ensure!(self.round == e.round, "round");
        hex_eq("block_hash", &self.block_hash, &e.block_hash)?;
        hex_eq("voter_id", &self.voter_id, &e.voter_id)?;
        hex_eq("signature", &self.signature, &e.signature)?;
        ensure!(self.timestamp == e.timestamp, "timestamp");
        ensure!(self.vote_type == e.vote_type, "vote_type");
        hex_eq("payload", &self.payload, &e.payload)
    }
}

impl Codec for JsonRpc {
    const ID: registry::Codec = registry::Codec::JsonRpc;

    fn new() -> Self {
        JsonRpc { buf: Vec::new() }
    }

    #[inline]
    fn encode(&mut self, v: &VoteData, side: Envelope) -> Result<&[u8]> {
        self.buf.clear();
        let vote = VoteJson::from_data(v);
        match side {
            Envelope::Request => serde_json::to_writer(
                &mut self.buf,
                &RequestOut { jsonrpc: "2.0", method: "vote", params: &vote, id: v.round },
            )?,
            Envelope::Response => {
                serde_json::to_writer(&mut self.buf, &ResponseOut { jsonrpc: "2.0", result: &vote, id: v.round })?
            }
        }
        Ok(&self.buf)
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, side: Envelope) -> Result<()> {
        let (jsonrpc, id, vote) = match side {
            Envelope::Request => {
                let r: RequestIn = serde_json::from_slice(bytes).context("JSON-RPC request")?;
                ensure!(r.method == "vote", "method {:?}", r.method);
                (r.jsonrpc, r.id, r.params)
            }
            Envelope::Response => {
                let r: ResponseIn = serde_json::from_slice(bytes).context("JSON-RPC response")?;
                (r.jsonrpc, r.id, r.result)
            }
        };
        ensure!(jsonrpc == "2.0", "jsonrpc version {jsonrpc:?}");
        ensure!(id == e.round, "id");
        vote.check(e)
    }
}

/// Hex digits of a byte slice, written straight into the serializer.
struct Hex<'a>(&'a [u8]);

impl std::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // PERF: hex digits go out in chunks through a stack buffer; a
        // `write!` per byte runs the formatting machinery per byte (≈ 4× the
        // owned-`String` row's encode time, measured).
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 256];
        for chunk in self.0.chunks(out.len() / 2) {
            for (i, b) in chunk.iter().enumerate() {
                out[2 * i] = DIGITS[(b >> 4) as usize];
                out[2 * i + 1] = DIGITS[(b & 15) as usize];
            }
            f.write_str(std::str::from_utf8(&out[..2 * chunk.len()]).map_err(|_| std::fmt::Error)?)?;
        }
        Ok(())
    }
}

impl Serialize for Hex<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Serialize)]
struct VoteHexOut<'a> {
    round: u64,
    block_hash: Hex<'a>,
    voter_id: Hex<'a>,
    signature: Hex<'a>,
    timestamp: u64,
    vote_type: u8,
    #[serde(skip_serializing_if = "is_empty_hex")]
    payload: Hex<'a>,
}

fn is_empty_hex(h: &Hex<'_>) -> bool {
    h.0.is_empty()
}

#[derive(Serialize)]
struct RequestRefOut<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: VoteHexOut<'a>,
    id: u64,
}

#[derive(Serialize)]
struct ResponseRefOut<'a> {
    jsonrpc: &'static str,
    result: VoteHexOut<'a>,
    id: u64,
}

#[derive(Deserialize)]
struct VoteRef<'a> {
    round: u64,
    #[serde(borrow)]
    block_hash: &'a str,
    #[serde(borrow)]
    voter_id: &'a str,
    #[serde(borrow)]
    signature: &'a str,
    timestamp: u64,
    vote_type: u8,
    #[serde(borrow, default)]
    payload: &'a str,
}

#[derive(Deserialize)]
struct RequestRefIn<'a> {
    #[serde(borrow)]
    jsonrpc: &'a str,
    #[serde(borrow)]
    method: &'a str,
    #[serde(borrow)]
    params: VoteRef<'a>,
    id: u64,
}

#[derive(Deserialize)]
struct ResponseRefIn<'a> {
    #[serde(borrow)]
    jsonrpc: &'a str,
    #[serde(borrow)]
    result: VoteRef<'a>,
    id: u64,
}

impl VoteRef<'_> {
    fn check(&self, e: &VoteData) -> Result<()> {
        ensure!(self.round == e.round, "round");
        hex_eq("block_hash", self.block_hash, &e.block_hash)?;
        hex_eq("voter_id", self.voter_id, &e.voter_id)?;
        hex_eq("signature", self.signature, &e.signature)?;
        ensure!(self.timestamp == e.timestamp, "timestamp");
        ensure!(self.vote_type == e.vote_type, "vote_type");
        hex_eq("payload", self.payload, &e.payload)
    }
}

pub struct JsonRpcBorrowed {
    buf: Vec<u8>,
}

impl Codec for JsonRpcBorrowed {
    const ID: registry::Codec = registry::Codec::JsonRpcBorrowed;

    fn new() -> Self {
        JsonRpcBorrowed { buf: Vec::new() }
    }

    #[inline]
    fn encode(&mut self, v: &VoteData, side: Envelope) -> Result<&[u8]> {
        self.buf.clear();
        let vote = VoteHexOut {
            round: v.round,
            block_hash: Hex(&v.block_hash),
            voter_id: Hex(&v.voter_id),
            signature: Hex(&v.signature),
            timestamp: v.timestamp,
            vote_type: v.vote_type,
            payload: Hex(&v.payload),
        };
        match side {
            Envelope::Request => serde_json::to_writer(
                &mut self.buf,
                &RequestRefOut { jsonrpc: "2.0", method: "vote", params: vote, id: v.round },
            )?,
            Envelope::Response => {
                serde_json::to_writer(&mut self.buf, &ResponseRefOut { jsonrpc: "2.0", result: vote, id: v.round })?
            }
        }
        Ok(&self.buf)
    }

    #[inline]
    fn decode(&mut self, bytes: &[u8], e: &VoteData, side: Envelope) -> Result<()> {
        // NOTE: a `&str` field fails on a string with escapes (it cannot
        // borrow); hex digits never need one.
        let (jsonrpc, id, vote) = match side {
            Envelope::Request => {
                let r: RequestRefIn<'_> = serde_json::from_slice(bytes).context("JSON-RPC request")?;
                ensure!(r.method == "vote", "method {:?}", r.method);
                (r.jsonrpc, r.id, r.params)
            }
            Envelope::Response => {
                let r: ResponseRefIn<'_> = serde_json::from_slice(bytes).context("JSON-RPC response")?;
                (r.jsonrpc, r.id, r.result)
            }
        };
        ensure!(jsonrpc == "2.0", "jsonrpc version {jsonrpc:?}");
        ensure!(id == e.round, "id");
        vote.check(e)
    }
}
