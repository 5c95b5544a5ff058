//! The `heap_profile` call: the sampling build (`--features
//! server/jemalloc-prof`, its own step of the test command) answers a
//! gzipped pprof profile of what jemalloc sampled since the server started,
//! which the trace crate reads back; every other build answers 501 naming
//! itself.

mod common;

use common::TempDir;
use server::client::{Client, ClientError};
use std::io::BufRead;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server at `lg_prof_sample` = `lg` (jemalloc's own variable, as
/// production sets it), on a fresh data directory.
fn serve(dir: &TempDir, lg: u32) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_datastore-server"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.0.join("db"))
        .arg("--trace")
        .arg(dir.0.join("server.sampled.json"))
        .env("_RJEM_MALLOC_CONF", format!("lg_prof_sample:{lg}"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting datastore-server");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("printed {line:?}")).parse().unwrap();
    Server { child, addr }
}

fn heap_profile(c: &mut Client) -> Result<Vec<u8>, ClientError> {
    let p = c.heap_profile()?;
    c.wait_bytes(p)
}

fn create(c: &mut Client) {
    c.execute("CREATE TABLE t (k UInt64, s String) ORDER BY (k)").unwrap();
}

/// Inserts `rows` rows into the table.
fn load(c: &mut Client, rows: u64) {
    let batch = datastore::Batch {
        columns: vec![
            datastore::ColumnData::U64((0..rows).collect()),
            datastore::ColumnData::Str((0..rows).map(|i| format!("row {i} of the heap profile test")).collect()),
        ],
    };
    let schema = [("k".to_string(), datastore::ColumnType::UInt64), ("s".to_string(), datastore::ColumnType::String)];
    let p = c.insert("t", &schema, &batch).unwrap();
    c.wait(p).unwrap();
}

#[cfg(feature = "jemalloc-prof")]
#[test]
fn the_sampling_build_answers_its_heap_in_pprof() {
    let dir = TempDir::new("heap-profile");
    // Every allocation sampled: the estimates are the counts.
    let s = serve(&dir, 0);
    let mut c = Client::connect(s.addr).unwrap();
    create(&mut c);
    load(&mut c, 200);
    let read = |bytes: &[u8], name: &str| {
        let path = dir.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        trace::Trace::load(&path).unwrap_or_else(|e| panic!("{e}"))
    };
    let first = read(&heap_profile(&mut c).unwrap(), "first.pb.gz");
    assert_eq!(first.sampling, Some(trace::Sampling { lg_sample: 0, interval: 1, peak_dumps: None }));
    assert!(first.cmd.contains("datastore-server") && first.cmd.contains("serve"), "{}", first.cmd);
    // The engine's own allocations are attributed to it, and something is live.
    let engine = |t: &trace::Trace| -> u64 {
        t.sites
            .iter()
            .filter(|x| x.stack.iter().any(|f| f.krate.as_deref() == Some("datastore")))
            .map(|x| x.blocks)
            .sum()
    };
    assert!(engine(&first) > 0, "no site reaches the datastore crate");
    assert!(first.sites.iter().map(|x| x.at_exit).sum::<u64>() > 0, "nothing live");
    // Cumulative: more work, more allocations counted, the earlier kept.
    load(&mut c, 2000);
    let second = read(&heap_profile(&mut c).unwrap(), "second.pb.gz");
    assert!(second.total_blocks() > first.total_blocks());
    assert!(engine(&second) > engine(&first));

    // At production's interval (2^19 bytes) the answer is an estimate, and says so.
    let s = serve(&TempDir::new("heap-profile-19"), 19);
    let mut c = Client::connect(s.addr).unwrap();
    create(&mut c);
    load(&mut c, 200);
    let sampled = read(&heap_profile(&mut c).unwrap(), "sampled.pb.gz");
    assert_eq!(sampled.sampling, Some(trace::Sampling { lg_sample: 19, interval: 1 << 19, peak_dumps: None }));
}

#[cfg(not(feature = "jemalloc-prof"))]
#[test]
fn a_build_without_the_profiler_says_so() {
    let dir = TempDir::new("heap-profile-none");
    let s = serve(&dir, 19);
    let mut c = Client::connect(s.addr).unwrap();
    create(&mut c);
    load(&mut c, 10);
    match heap_profile(&mut c) {
        Err(ClientError::Status { status, message }) => {
            assert_eq!(status, server::protocol::NOT_BUILT);
            assert!(message.contains(probe::VARIANT.name()) && message.contains("jemalloc-prof"), "{message}");
        }
        other => panic!("expected 501, got {:?}", other.map(|b| b.len())),
    }
    // The connection goes on.
    let r = c.execute("SELECT count() FROM t").unwrap();
    assert_eq!(r.rows.len(), 1);
}
