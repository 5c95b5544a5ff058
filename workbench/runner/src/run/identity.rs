//! A measured binary's identity: what the process loads, hashed, so that a
//! dataset ages when the code that ran changed, not when a source file did.
//!
//! The identity is the git blob id of a listing of the binary's allocated
//! ELF sections (`SHF_ALLOC`: code, read-only data, data, unwind tables,
//! `.bss` by its size alone), each as its name, type, flags, address and
//! size, then its bytes. Left out, since none of it is loaded or none of it
//! changes what runs:
//! - every section that is not allocated (debug info, the symbol tables,
//!   `.comment`): a path in debug info is not code;
//! - `.note.gnu.build-id`, a hash the linker takes over the whole file,
//!   debug info included;
//! - the revision stamp (`probe::GIT_REVISION`, what the binary answers to
//!   `--revision`), zeroed wherever its bytes occur: it is the same length
//!   at every commit (40 hex digits), so it moves nothing else, and a commit
//!   that changes no code would otherwise change every binary.
//!
//! NOTE: the ELF file is read by hand (64-bit, little-endian, the only kind
//! the measured binaries are built as): two dozen lines against a new
//! dependency in the runner.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `SHF_ALLOC`: the section occupies memory while the process runs.
const SHF_ALLOC: u64 = 0x2;
/// `SHT_NOBITS`: the section has a size but no bytes in the file (`.bss`).
const SHT_NOBITS: u32 = 8;
/// Sections that are allocated but say nothing about the code: the build
/// id hashes the whole file (debug info included).
const LEFT_OUT: &[&str] = &[".note.gnu.build-id"];

/// Why a binary has no identity.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a 64-bit little-endian ELF file")]
    NotElf { path: PathBuf },
    #[error("{path}: {what} at byte {offset} lies past the end of the file ({len} bytes)")]
    Truncated { path: PathBuf, what: &'static str, offset: u64, len: usize },
    #[error("hashing {path} with git hash-object: {why}")]
    Hash { path: PathBuf, why: String },
}

/// The identity of the binary at `path`, with every occurrence of each of
/// `stamps` (the revision it was built at) zeroed.
pub fn identity(path: &Path, stamps: &[&[u8]]) -> Result<String, IdentityError> {
    let bytes = std::fs::read(path).map_err(|source| IdentityError::Read { path: path.into(), source })?;
    let listing = listing(path, &bytes, stamps)?;
    hash(path, &listing)
}

/// The listing [`identity`] hashes.
pub fn listing(path: &Path, elf: &[u8], stamps: &[&[u8]]) -> Result<Vec<u8>, IdentityError> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return Err(IdentityError::NotElf { path: path.into() });
    }
    let at = |what: &'static str, offset: u64, n: usize| -> Result<&[u8], IdentityError> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        start.checked_add(n).and_then(|end| elf.get(start..end)).ok_or(IdentityError::Truncated {
            path: path.into(),
            what,
            offset,
            len: elf.len(),
        })
    };
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let shoff = u64_at(elf, 0x28);
    let shentsize = u64::from(u16_at(elf, 0x3A));
    let shnum = u64::from(u16_at(elf, 0x3C));
    let shstrndx = u64::from(u16_at(elf, 0x3E));
    if shentsize < 64 {
        return Err(IdentityError::NotElf { path: path.into() });
    }
    let header = |i: u64| at("a section header", shoff + i * shentsize, 64);
    let names = header(shstrndx)?;
    let (names_off, names_len) = (u64_at(names, 24), u64_at(names, 32));
    let names = at("the section names", names_off, usize::try_from(names_len).unwrap_or(usize::MAX))?;
    let mut out = Vec::new();
    for i in 0..shnum {
        let h = header(i)?;
        let (name_at, kind, flags) = (u32_at(h, 0) as usize, u32_at(h, 4), u64_at(h, 8));
        let (addr, offset, size) = (u64_at(h, 16), u64_at(h, 24), u64_at(h, 32));
        if flags & SHF_ALLOC == 0 {
            continue;
        }
        let name = names.get(name_at..).and_then(|n| n.split(|b| *b == 0).next()).unwrap_or_default();
        let name = String::from_utf8_lossy(name);
        if LEFT_OUT.contains(&name.as_ref()) {
            continue;
        }
        writeln!(out, "{name} {kind} {flags:#x} {addr:#x} {size}").expect("writing to a Vec");
        if kind != SHT_NOBITS {
            let mut body = at("a section's bytes", offset, usize::try_from(size).unwrap_or(usize::MAX))?.to_vec();
            for s in stamps {
                mask(&mut body, s);
            }
            out.extend_from_slice(&body);
            out.push(b'\n');
        }
    }
    Ok(out)
}

/// The revision stamp `bin` answers to `--revision`
/// (`probe::cell::Invocation`), when it answers one ([`is_stamp`]): what
/// [`identity`] masks in every binary of its build.
pub fn stamp_of(bin: &Path) -> Result<Option<String>, IdentityError> {
    let out = Command::new(bin)
        .arg("--revision")
        .output()
        .map_err(|source| IdentityError::Read { path: bin.into(), source })?;
    let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && is_stamp(&s)).then_some(s))
}

/// Whether `s` is a revision stamp worth masking: 40 hex digits (a build
/// outside git stamps `unknown`, which is left alone).
pub fn is_stamp(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Zeroes every occurrence of `stamp` in `bytes`.
fn mask(bytes: &mut [u8], stamp: &[u8]) {
    if stamp.is_empty() || stamp.len() > bytes.len() {
        return;
    }
    let mut i = 0;
    while i + stamp.len() <= bytes.len() {
        if &bytes[i..i + stamp.len()] == stamp {
            bytes[i..i + stamp.len()].fill(0);
            i += stamp.len();
        } else {
            i += 1;
        }
    }
}

/// The git blob id of `bytes`, so that an identity reads like every other
/// hash of a manifest.
fn hash(path: &Path, bytes: &[u8]) -> Result<String, IdentityError> {
    let fail = |why: String| IdentityError::Hash { path: path.into(), why };
    let mut child = Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(e.to_string()))?;
    let mut stdin = child.stdin.take().expect("piped");
    let bytes = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let out = child.wait_with_output().map_err(|e| fail(e.to_string()))?;
    writer.join().expect("the writer thread").map_err(|e| fail(e.to_string()))?;
    if !out.status.success() {
        return Err(fail(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_zeroed_wherever_it_occurs() {
        let mut b = b"xxabcyyabcabz".to_vec();
        mask(&mut b, b"abc");
        assert_eq!(b, b"xx\0\0\0yy\0\0\0abz");
        let mut short = b"ab".to_vec();
        mask(&mut short, b"abc");
        assert_eq!(short, b"ab");
    }

    #[test]
    fn a_file_that_is_not_elf_is_named() {
        let dir = std::env::temp_dir().join(format!("identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("not-elf");
        std::fs::write(&p, b"#!/bin/sh\necho hi\n").unwrap();
        let e = identity(&p, &[]).unwrap_err().to_string();
        assert!(e.contains("not-elf") && e.contains("not a 64-bit"), "{e}");
        let e = identity(&dir.join("absent"), &[]).unwrap_err().to_string();
        assert!(e.contains("absent"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn the_test_binary_itself_has_an_identity_that_sees_its_code() {
        let me = std::env::current_exe().unwrap();
        let elf = std::fs::read(&me).unwrap();
        let plain = listing(&me, &elf, &[]).unwrap();
        assert!(plain.windows(6).any(|w| w == b".text "), "the listing names .text");
        assert!(!plain.windows(12).any(|w| w == b".debug_info "), "debug info is left out");
        // A stamp that occurs (this very string is in .rodata) changes the listing when masked.
        let stamp: &[u8] = b"a stamp this test looks for";
        assert_ne!(listing(&me, &elf, &[stamp]).unwrap(), plain);
        assert_eq!(identity(&me, &[]).unwrap(), identity(&me, &[]).unwrap());
    }
}
