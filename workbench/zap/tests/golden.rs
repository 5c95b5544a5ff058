//! The 47-byte golden vector of the Go reference, byte for byte, both ways.

use zap::{Builder, Bytes, Text};

zap::zap_struct! {
    /// The golden vector's root: u32 at 0, text at 8, bytes at 16.
    struct Golden / GoldenReader / GoldenBuilder {
        value: u32,
        // Aligning pointer slots to 4 puts `text` at 4; the Go schema leaves a gap.
        gap: u32,
        text: Text,
        bytes: Bytes,
    }
}

fn golden() -> Vec<u8> {
    let hex =
        "5a415000 0100 0000 10000000 2f000000 efbeadde 00000000 10000000 03000000 0b000000 04000000 7a6170 01020304";
    let hex: String = hex.split_whitespace().collect();
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn builder_produces_the_golden_bytes() {
    assert_eq!((Golden::value, Golden::text, Golden::bytes, Golden::SIZE), (0, 8, 16, 24));
    let mut b = Builder::new();
    let mut g = b.root::<Golden>();
    g.value(0xDEAD_BEEF);
    g.text("zap");
    g.bytes(&[1, 2, 3, 4]);
    let bytes = g.finish().unwrap();
    assert_eq!(bytes.len(), 47);
    assert_eq!(bytes, &golden()[..]);
}

#[test]
fn slice_builder_produces_the_same_bytes() {
    let mut buf = [0u8; 64];
    let mut b = Builder::over(&mut buf);
    let mut g = b.root::<Golden>();
    g.value(0xDEAD_BEEF);
    g.text("zap");
    g.bytes(&[1, 2, 3, 4]);
    assert_eq!(g.finish().unwrap(), &golden()[..]);

    let mut small = [0u8; 46];
    let mut b = Builder::over(&mut small);
    let mut g = b.root::<Golden>();
    g.value(0xDEAD_BEEF);
    g.text("zap");
    g.bytes(&[1, 2, 3, 4]);
    assert_eq!(g.finish().unwrap_err(), zap::Error::BufferFull { needed: 47, capacity: 46 });
}

#[test]
fn reader_reads_the_golden_values() {
    let bytes = golden();
    let msg = zap::parse(&bytes).unwrap();
    assert_eq!((msg.version(), msg.flags(), msg.root_offset()), (1, 0, 16));
    let g = msg.root::<Golden>().unwrap();
    assert_eq!(g.value(), 0xDEAD_BEEF);
    assert_eq!(g.text().unwrap(), "zap");
    assert_eq!(g.bytes().unwrap(), &[1, 2, 3, 4]);
    assert_eq!(g.as_struct().bytes(Golden::text, "text").unwrap(), b"zap");
}

#[test]
fn version_two_reads_the_same_and_can_be_emitted() {
    let mut bytes = golden();
    bytes[4] = 2;
    let g = zap::read::<Golden>(&bytes).unwrap();
    assert_eq!((g.value(), g.text().unwrap()), (0xDEAD_BEEF, "zap"));

    let mut b = Builder::new();
    b.set_version(2);
    let mut g = b.root::<Golden>();
    g.value(0xDEAD_BEEF);
    g.text("zap");
    g.bytes(&[1, 2, 3, 4]);
    assert_eq!(g.finish().unwrap(), &bytes[..]);
}
