//! Seeded vote values: the same fields for every codec, on any machine.

/// The benchmark message as plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoteData {
    pub round: u64,
    pub block_hash: [u8; 32],
    pub voter_id: [u8; 32],
    pub signature: [u8; 64],
    pub timestamp: u64,
    pub vote_type: u8,
    pub payload: Vec<u8>,
}

/// splitmix64: tiny, seedable, and identical everywhere (no `rand` version drift).
/// Byte-slice equality that does not call `memcmp` for empty slices.
///
/// PERF: an empty `Vec`'s pointer is dangling (0x1), and glibc's `memcmp`
/// on this machine's CPU takes ~80 ns for `n = 0` at such an address
/// (measured: 79 ns vs 2 ns for a one-byte compare) — presumably a masked
/// vector load touching the unmapped page before the length check. Every
/// codec's decode compares the payload, so without this the bare-vote
/// (0-byte payload) rows measured libc, not the codec.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fill(state: &mut u64, out: &mut [u8]) {
    for chunk in out.chunks_mut(8) {
        let v = splitmix(state).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

impl VoteData {
    /// A vote with a payload of `payload` bytes; [`VoteData::set`] refills it.
    pub fn with_payload(payload: usize) -> Self {
        VoteData {
            round: 0,
            block_hash: [0; 32],
            voter_id: [0; 32],
            signature: [0; 64],
            timestamp: 0,
            vote_type: 0,
            payload: vec![0; payload],
        }
    }

    /// Refills every field for message `i` of `seed`, in place (no allocation).
    pub fn set(&mut self, seed: u64, i: u64) {
        let mut s = seed ^ i.wrapping_mul(0xA24B_AED4_963E_E407);
        self.round = i;
        fill(&mut s, &mut self.block_hash);
        fill(&mut s, &mut self.voter_id);
        fill(&mut s, &mut self.signature);
        // Timestamps in nanoseconds after 2025-01-01, one message per millisecond.
        self.timestamp = 1_735_689_600_000_000_000 + i * 1_000_000;
        self.vote_type = (i % 3) as u8;
        fill(&mut s, &mut self.payload);
    }
}
