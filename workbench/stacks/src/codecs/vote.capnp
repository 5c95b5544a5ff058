# The benchmark Vote for Cap'n Proto; compiled by capnp (capnpc) in build.rs.
@0xc9a7e2b4d1f08a63;

struct Vote {
  round @0 :UInt64;
  blockHash @1 :Data;
  voterId @2 :Data;
  signature @3 :Data;
  timestamp @4 :UInt64;
  voteType @5 :UInt8;
  payload @6 :Data;
}

# The capnp-rpc row: one call per round trip, the vote out and back.
interface Voting {
  cast @0 (vote :Vote) -> (vote :Vote);
}
