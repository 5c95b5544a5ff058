//! A binary's identity follows its code, not its sources' bytes nor where
//! it was built: a toy crate built by cargo in folders of their own (each
//! with its own target directory, paths of other lengths), at other
//! revision stamps, with a dead private function appended, with one
//! constant changed.

use runner::run::identity::identity;
use std::path::{Path, PathBuf};
use std::process::Command;

/// NOTE: the stamp is a constant of its own, as `probe::GIT_REVISION` is,
/// and reaches `println!` as a value (`black_box`): a literal argument is
/// folded into the format string, whose merged place in `.rodata` then
/// moves with its bytes, and other code with it.
const MAIN: &str = r#"
const SCALE: u64 = 7;
const STAMP: &str = env!("TOY_STAMP");

fn main() {
    let n: u64 = std::env::args().count() as u64;
    println!("{} {}", std::hint::black_box(STAMP), n * SCALE);
}
"#;

/// Builds the toy with `main_rs` at stamp `stamp` in a folder named
/// `name`; the binary's path.
fn build(base: &Path, name: &str, main_rs: &str, stamp: &str) -> PathBuf {
    let dir = base.join(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"toy\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n\n[profile.release]\ndebug = 1\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), main_rs).unwrap();
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&dir)
        .args(["build", "--release", "--quiet", "--offline"])
        .env("TOY_STAMP", stamp)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("CARGO_BUILD_BUILD_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "building {name}: {}", String::from_utf8_lossy(&out.stderr));
    dir.join("target/release/toy")
}

#[test]
fn identity_follows_the_code_alone() {
    let base = std::env::temp_dir().join(format!("identity-toy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (a_stamp, b_stamp) = ("a".repeat(40), "0123456789abcdef0123456789abcdef01234567".to_string());
    let a = build(&base, "a", MAIN, &a_stamp);
    let dead = format!("{MAIN}\n#[allow(dead_code)]\nfn nobody_calls_this() -> u64 {{\n    SCALE * 3\n}}\n");
    let b = build(&base, "another-folder-with-a-longer-name", &dead, &b_stamp);
    let changed = build(&base, "c", &MAIN.replace("SCALE: u64 = 7", "SCALE: u64 = 8"), &a_stamp);
    let id = |bin: &Path, stamp: &str| identity(bin, &[stamp.as_bytes()]).unwrap();
    assert_eq!(id(&a, &a_stamp), id(&b, &b_stamp), "another folder, another stamp, a dead function: same code");
    assert_ne!(identity(&a, &[]).unwrap(), identity(&b, &[]).unwrap(), "the stamps differ where they are not masked");
    assert_ne!(id(&a, &a_stamp), id(&changed, &a_stamp), "one constant changed: other code");
    std::fs::remove_dir_all(&base).ok();
}
