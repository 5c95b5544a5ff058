#!/usr/bin/env bash
# The main job: the quick suite (every spec in experiments/ at quick scale),
# then every output from the data (`workbench render`).
# Pass `--scale full` and spec names for the papers' scales, e.g.
#   scripts/quick.sh heap-growth --scale full
set -euo pipefail
cd "$(dirname "$0")/.."
# The main job compares against peers the tests do not need (chDB).
export WB_PEERS=1
# The Python environment (chDB's wheels among it) installs beside the build.
WB_PYTHON_ENV=background
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
if [ $# -eq 0 ]; then set -- quick; fi
# NOTE: build the workspace's binaries and run them: `cargo run -p X`
# unifies features over X alone and recompiles polars (~5 min) and the
# datastore's dependencies. PERF (cold build): `cargo build`, not the test
# command's `cargo test --no-run`: it skips the test targets and their
# dev-dependencies (from a fresh clone, 573 s against 653 s on 2 cores,
# 2026-12-03; the test targets were ≈ 190 s of CPU), and every crate it
# compiles is one the test build compiles as well (same features: see the
# proptest, divan and clap notes in the manifests; the test command checks
# it), so neither command compiles anything again after the other.
cargo build --release --workspace
python_env_wait
# NOTE: tables and figures are written last: they are tracked files, and a
# benchmark started after they change would record a dirty tree.
target/release/workbench run --no-report "$@"
# Every output from data/ in one process, each dataset loaded once: both
# scales' tables (paper/generated/) and figures (figures/), the paper's
# macros and claims audit, paper/build/main.pdf and the browsable report
# (not committed; open its index). LaTeX runs beside the site.
target/release/workbench render
