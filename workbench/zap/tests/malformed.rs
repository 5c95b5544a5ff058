//! Bad input yields a typed error naming what is wrong, never a panic.

use zap::{Builder, Error, Vote};

fn vote_bytes() -> Vec<u8> {
    let mut b = Builder::new();
    let mut v = b.root::<Vote>();
    v.round(7);
    v.payload(b"abcdef");
    v.finish().unwrap().to_vec()
}

#[test]
fn header_errors() {
    assert_eq!(zap::parse(&[0; 15]).unwrap_err(), Error::TooShort { len: 15 });
    let mut b = vote_bytes();
    b[0] = b'X';
    assert!(matches!(zap::parse(&b), Err(Error::BadMagic { .. })));
    let mut b = vote_bytes();
    b[4] = 3;
    assert_eq!(zap::parse(&b).unwrap_err(), Error::UnsupportedVersion { version: 3 });
    let mut b = vote_bytes();
    b[6] = 1;
    assert_eq!(zap::parse(&b).unwrap_err(), Error::UnsupportedFlags { flags: 1 });
    let mut b = vote_bytes();
    b[6] = 4; // signed: accepted, the data segment is unchanged
    b[7] = 9; // message type
    let m = zap::parse(&b).unwrap();
    assert_eq!(m.message_type(), 9);
    let mut b = vote_bytes();
    let n = b.len();
    b[12..16].copy_from_slice(&(n as u32 + 1).to_le_bytes());
    assert_eq!(zap::parse(&b).unwrap_err(), Error::BadSize { declared: n as u32 + 1, available: n });
    b[12..16].copy_from_slice(&8u32.to_le_bytes());
    assert!(matches!(zap::parse(&b), Err(Error::BadSize { declared: 8, .. })));
}

#[test]
fn root_outside_message_is_rejected() {
    let mut b = vote_bytes();
    b[8..12].copy_from_slice(&4u32.to_le_bytes()); // inside the header
    assert!(matches!(zap::read::<Vote>(&b), Err(Error::StructOutOfBounds { schema: "Vote", pos: 4, .. })));
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(zap::read::<Vote>(&b), Err(Error::StructOutOfBounds { .. })));
}

#[test]
fn pointer_past_end_names_the_field() {
    let mut b = vote_bytes();
    let slot = 16 + Vote::payload;
    b[slot + 4..slot + 8].copy_from_slice(&1000u32.to_le_bytes());
    let v = zap::read::<Vote>(&b).unwrap();
    let err = v.payload().unwrap_err();
    assert!(
        matches!(err, Error::PointerOutOfBounds { field: "payload", slot: s, len: 1000, .. } if s == slot),
        "{err:?}"
    );
    assert!(err.to_string().contains("payload"));
    // Scalars are still readable.
    assert_eq!(v.round(), 7);
    // rel near u32::MAX must not wrap around.
    b[slot..slot + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(zap::read::<Vote>(&b).unwrap().payload().is_err());
}

#[test]
fn invalid_utf8_names_the_field_and_raw_access_still_works() {
    let mut b = vote_bytes();
    let n = b.len();
    b[n - 1] = 0xff;
    let v = zap::read::<Vote>(&b).unwrap();
    let s = v.as_struct();
    assert_eq!(s.text(Vote::payload, "payload").unwrap_err(), Error::InvalidUtf8 { field: "payload", valid_up_to: 5 });
    assert_eq!(s.bytes(Vote::payload, "payload").unwrap(), b"abcde\xff");
}

#[test]
fn null_pointers_read_as_documented_defaults() {
    let mut b = Builder::new();
    let v = b.root::<Vote>();
    let bytes = v.finish().unwrap().to_vec();
    let v = zap::read::<Vote>(&bytes).unwrap();
    assert_eq!(v.payload().unwrap(), b"");
    assert_eq!(v.block_hash(), &[0u8; 32]);
}
