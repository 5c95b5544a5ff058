//! JSON-RPC 2.0 with serde_json, as its users write it: byte fields as hex
//! strings in a derived struct, the vote as `params` of a request and
//! `result` of a response, serialized into a reused buffer.

use super::{Codec, Side};
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
    const NAME: &'static str = "json-rpc";

    fn new() -> Self {
        JsonRpc { buf: Vec::new() }
    }

    fn encode(&mut self, v: &VoteData, side: Side) -> Result<&[u8]> {
        self.buf.clear();
        let vote = VoteJson::from_data(v);
        match side {
            Side::Request => serde_json::to_writer(
                &mut self.buf,
                &RequestOut { jsonrpc: "2.0", method: "vote", params: &vote, id: v.round },
            )?,
            Side::Response => {
                serde_json::to_writer(&mut self.buf, &ResponseOut { jsonrpc: "2.0", result: &vote, id: v.round })?
            }
        }
        Ok(&self.buf)
    }

    fn decode(&mut self, bytes: &[u8], e: &VoteData, side: Side) -> Result<()> {
        let (jsonrpc, id, vote) = match side {
            Side::Request => {
                let r: RequestIn = serde_json::from_slice(bytes).context("JSON-RPC request")?;
                ensure!(r.method == "vote", "method {:?}", r.method);
                (r.jsonrpc, r.id, r.params)
            }
            Side::Response => {
                let r: ResponseIn = serde_json::from_slice(bytes).context("JSON-RPC response")?;
                (r.jsonrpc, r.id, r.result)
            }
        };
        ensure!(jsonrpc == "2.0", "jsonrpc version {jsonrpc:?}");
        ensure!(id == e.round, "id");
        vote.check(e)
    }
}
