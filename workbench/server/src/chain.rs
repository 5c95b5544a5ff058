//! The dependent-chain workload of the pipelining benchmark and tests:
//! table `chain` holds k = 0..1000, and each step asks for the next key
//! after the previous step's answer, so a chain of depth d ends at d.

use crate::client::{Client, ClientError};
use datastore::{Batch, ColumnData, ColumnType, Value};

type Result<T> = std::result::Result<T, ClientError>;

const CHAIN_TABLE: &str = "chain";
const CHAIN_ROWS: u64 = 1000;

/// Makes table `chain` (k = 0..1000) through the server if it is missing.
pub fn ensure_table(c: &mut Client) -> Result<()> {
    if c.execute(&format!("SELECT count() FROM {CHAIN_TABLE}")).is_ok() {
        return Ok(());
    }
    c.execute(&format!("CREATE TABLE {CHAIN_TABLE} (k UInt64) ORDER BY (k)"))?;
    let batch = Batch { columns: vec![ColumnData::U64((0..CHAIN_ROWS).collect())] };
    let p = c.insert(CHAIN_TABLE, &[("k".to_string(), ColumnType::UInt64)], &batch)?;
    c.wait(p)?;
    c.finish(p)?;
    Ok(())
}

/// The first query of a chain and the step that follows each: every step
/// returns the next key, so a chain of depth d ends at d.
pub const FIRST: &str = "SELECT min(k) FROM chain WHERE k > 0";
pub const STEP: &str = "SELECT min(k) FROM chain WHERE k > $prev";

fn first_u64(c: &mut Client, p: zap::rpc::Promise) -> Result<u64> {
    let v = c.wait(p)?.first_value()?;
    match v {
        Some(Value::U(x)) => Ok(x),
        other => Err(ClientError::Unexpected(format!("chain step answered {other:?}"))),
    }
}

/// A pipelined chain: every call sent in one flight, the last one awaited.
/// The links before it are finished in the same flight, before their
/// answers: the client wants only the last value, so the server answers the
/// others without rows (see `work::QueryCall::wanted`).
pub fn pipelined(c: &mut Client, depth: usize) -> Result<u64> {
    let mut last = c.query(FIRST)?;
    let mut links = Vec::with_capacity(depth);
    for _ in 1..depth {
        links.push(last);
        last = c.query_on(last, STEP)?;
    }
    for p in links {
        c.finish(p)?;
    }
    let v = first_u64(c, last)?;
    c.finish(last)?;
    Ok(v)
}

/// The same chain request-response: each value read before the next call.
pub fn request_response(c: &mut Client, depth: usize) -> Result<u64> {
    let mut v = 0;
    for _ in 0..depth {
        let p = c.query(&format!("SELECT min(k) FROM chain WHERE k > {v}"))?;
        v = first_u64(c, p)?;
        c.finish(p)?;
    }
    Ok(v)
}
