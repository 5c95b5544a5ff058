//! A chain of 64 dependent calls through the delay proxy arrives in one
//! client flight and ends at the right value; request-response takes 64.

mod common;

use common::TempDir;
use server::client::Client;
use std::time::Duration;

use server::chain;

#[test]
fn a_chain_of_64_is_one_flight_pipelined_and_64_request_response() {
    let d = TempDir::new("chain");
    let s = server::start(&d.0, "127.0.0.1:0", server::limits::Config::default()).unwrap();
    chain::ensure_table(&mut Client::connect(s.addr).unwrap()).unwrap();
    let proxy = server::proxy::start("127.0.0.1:0", s.addr, Duration::from_micros(250)).unwrap();
    let mut c = Client::connect(proxy.addr).unwrap();

    let f0 = proxy.stats.flights();
    assert_eq!(chain::pipelined(&mut c, 64).unwrap(), 64);
    assert_eq!(proxy.stats.flights() - f0, 1, "the chain left in one flight");

    let f0 = proxy.stats.flights();
    assert_eq!(chain::request_response(&mut c, 64).unwrap(), 64);
    assert_eq!(proxy.stats.flights() - f0, 64, "one flight per call");
}

#[test]
fn a_failed_link_fails_the_rest_of_the_chain() {
    let d = TempDir::new("chainfail");
    let s = server::start(&d.0, "127.0.0.1:0", server::limits::Config::default()).unwrap();
    let mut c = Client::connect(s.addr).unwrap();
    chain::ensure_table(&mut c).unwrap();
    let a = c.query(chain::FIRST).unwrap();
    let b = c.query_on(a, "SELECT min(nope) FROM chain WHERE k > $prev").unwrap();
    let z = c.query_on(b, chain::STEP).unwrap();
    assert_eq!(c.wait(a).unwrap().first_value().unwrap(), Some(datastore::Value::U(1)));
    let e = c.wait(b).err().unwrap().to_string();
    assert!(e.starts_with("status 422") && e.contains("no column `nope`"), "{e}");
    let e = c.wait(z).err().unwrap().to_string();
    assert_eq!(e, format!("status 424 (target failed): target promise {} failed with status 422", b.0));
}

/// `$prev` takes the first value of the answer before it whatever its type:
/// Int64 and UInt64 answers (bound without decoding the answer) and String
/// and UInt8 ones (decoded from it). Each pipelined link answers as the same
/// query sent on its own with the previous value written in as a literal.
#[test]
fn prev_binds_every_answer_type_as_a_literal_would() {
    use datastore::{Batch, ColumnData, ColumnType, Value};
    let d = TempDir::new("chaintypes");
    let s = server::start(&d.0, "127.0.0.1:0", server::limits::Config::default()).unwrap();
    let mut c = Client::connect(s.addr).unwrap();
    c.execute("CREATE TABLE typed (k Int64, s String, u UInt8) ORDER BY (k)").unwrap();
    let cols = [
        ("k".to_string(), ColumnType::Int64),
        ("s".to_string(), ColumnType::String),
        ("u".to_string(), ColumnType::UInt8),
    ];
    let ks: Vec<i64> = (-20..20).collect();
    let batch = Batch {
        columns: vec![
            ColumnData::I64(ks.clone()),
            ColumnData::Str(ks.iter().map(|k| format!("s{}", k.rem_euclid(7))).collect()),
            ColumnData::U64(ks.iter().map(|k| (k * 3).rem_euclid(50) as u64).collect()),
        ],
    };
    let p = c.insert("typed", &cols, &batch).unwrap();
    c.wait(p).unwrap();
    c.finish(p).unwrap();
    let steps = [
        "SELECT max(k) FROM typed WHERE k < -3",
        "SELECT min(s) FROM typed WHERE k = $prev",
        "SELECT max(k) FROM typed WHERE s = $prev",
        "SELECT min(u) FROM typed WHERE k > $prev",
        "SELECT count() FROM typed WHERE u >= $prev",
        "SELECT max(k) FROM typed WHERE k < $prev",
    ];
    let mut promises = vec![c.query(steps[0]).unwrap()];
    for step in &steps[1..] {
        let prev = *promises.last().unwrap();
        promises.push(c.query_on(prev, step).unwrap());
    }
    let mut pipelined = Vec::new();
    for &p in &promises {
        pipelined.push(c.wait(p).unwrap().first_value().unwrap().expect("a value"));
        c.finish(p).unwrap();
    }
    let mut alone: Vec<Value> = Vec::new();
    for step in steps {
        let literal = match alone.last() {
            None => String::new(),
            Some(Value::S(s)) => format!("'{s}'"),
            Some(Value::U(x)) => x.to_string(),
            Some(Value::I(x)) => x.to_string(),
            Some(other) => panic!("no literal for {other:?}"),
        };
        let text = step.replace("$prev", &literal);
        alone.push(c.execute(&text).unwrap().rows[0][0].clone());
    }
    assert_eq!(pipelined, alone);
    let kinds: Vec<&str> = alone
        .iter()
        .map(|v| match v {
            Value::S(_) => "S",
            Value::U(_) => "U",
            Value::I(_) => "I",
            _ => "?",
        })
        .collect();
    assert_eq!(kinds, ["I", "S", "I", "U", "U", "I"], "every binding path is taken: {alone:?}");
    let _ = s.stop();
}
