#!/usr/bin/env bash
# The test command: formatting, lints, and every test, in the release profile
# (the same profile as the main job, so polars compiles once).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh

step() { echo; echo "==> $*"; }

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --all-targets -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
step "tests (release profile)"
cargo test --release --workspace
# The probe's per-variant tests need the allocator feature on; one at a time
# because dhat and jemalloc are both global allocators.
step "probe tests, dhat build"
cargo test --release -p probe --features dhat
step "probe tests, jemalloc build"
cargo test --release -p probe --features jemalloc
