//! Every codec round-trips a vote (client encode, server decode and check,
//! server encode, client decode and check), refuses a different vote and
//! turns truncated bytes into an error; the seeded votes every codec sends.
//!
//! These were the crate's unit tests; they use only its public API, and as
//! an integration test they link the library the workspace build compiled
//! instead of compiling it a second time in test mode (see Cargo.toml).

use anyhow::Result;
use subjects::codecs::{run_with, Codec, Envelope, WithCodec};
use subjects::experiments::{runs, Runs};
use subjects::vote::{same_bytes, VoteData};

struct RoundTrip(usize, registry::Codec);
impl WithCodec for RoundTrip {
    type Out = Result<usize>;
    fn run<C: Codec>(self) -> Result<usize> {
        anyhow::ensure!(C::ID == self.1, "{:?} dispatches to {}", self.1, C::NAME);
        let (mut client, mut server) = (C::new(), C::new());
        let mut v = VoteData::with_payload(self.0);
        v.set(7, 3);
        let req = client.encode(&v, Envelope::Request)?.to_vec();
        server.decode(&req, &v, Envelope::Request)?;
        let resp = server.encode(&v, Envelope::Response)?.to_vec();
        client.decode(&resp, &v, Envelope::Response)?;
        // A different vote must not pass the check.
        let mut other = v.clone();
        other.set(7, 4);
        anyhow::ensure!(server.decode(&req, &other, Envelope::Request).is_err(), "{} accepted a wrong vote", C::NAME);
        // Corrupted bytes are an error, not a panic.
        let mut bad = req.clone();
        let n = bad.len();
        bad.truncate(n / 2);
        anyhow::ensure!(server.decode(&bad, &v, Envelope::Request).is_err(), "{} accepted truncated bytes", C::NAME);
        Ok(req.len())
    }
}

#[test]
fn every_codec_round_trips_and_rejects() {
    for &id in registry::Codec::ALL {
        for size in [0, 64, 1024] {
            run_with(id, RoundTrip(size, id)).unwrap_or_else(|e| panic!("{id:?} size {size}: {e:#}"));
        }
    }
}

#[test]
fn the_subject_runs_what_the_registry_says_it_runs_over() {
    for &e in registry::Experiment::ALL {
        let Some(runs) = runs(e) else {
            assert_eq!(e.target(), registry::Target::DatastoreServer, "{e}");
            continue;
        };
        let over = match runs {
            Runs::Codecs(_) => registry::Over::Codecs,
            Runs::Transports(_) => registry::Over::Transports,
        };
        assert_eq!(e.over(), over, "{e}");
        assert_eq!(e.target(), registry::Target::Subject, "{e}");
    }
}

#[test]
fn same_bytes_is_slice_equality() {
    let empty: Vec<u8> = Vec::new();
    assert!(same_bytes(&empty, &[]));
    assert!(same_bytes(&[1, 2], &[1, 2]));
    assert!(!same_bytes(&[1, 2], &[1, 3]));
    assert!(!same_bytes(&[], &[0]));
}

#[test]
fn same_seed_same_vote_different_seed_different_vote() {
    let (mut a, mut b) = (VoteData::with_payload(100), VoteData::with_payload(100));
    a.set(1, 5);
    b.set(1, 5);
    assert_eq!(a, b);
    b.set(2, 5);
    assert_ne!(a.block_hash, b.block_hash);
    // Pinned so that a change to the generator is a visible decision.
    a.set(0, 0);
    // splitmix64(0) = 0xe220a8397b1dcdaf, the published first output, little-endian.
    assert_eq!(a.block_hash[..4], [0xaf, 0xcd, 0x1d, 0x7b]);
}

#[test]
fn each_sampled_profile_has_its_file_beside_the_cells_trace() {
    use probe::profile::sampled_path as profile_path;
    let p = profile_path(std::path::Path::new("/d/traces/zap-p0-jemalloc-prof-r1.sampled.json"), 12);
    assert_eq!(p, std::path::Path::new("/d/traces/zap-p0-jemalloc-prof-r1-lg12.sampled.json"));
}

/// The stacks' Cargo.toml builds no unit-test harness (`test = false`), so a
/// unit test written there would never run: there must be none.
#[test]
fn the_stacks_hold_no_unit_tests() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![here.join("../stacks/src")];
    let mut seen = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                seen += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                assert!(
                    !text.contains("#[cfg(test)]"),
                    "{}: unit tests here never run; put them in tests/",
                    path.display()
                );
            }
        }
    }
    assert!(seen > 10, "read only {seen} source files under stacks/src/");
}
