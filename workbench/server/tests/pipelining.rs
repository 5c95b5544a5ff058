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
