#!/usr/bin/env bash
# The main job: the quick suite (every spec in experiments/ at quick scale),
# then tables (paper/generated/) and figures (figures/) from the new data.
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
scale=quick prev=""
for a in "$@"; do
  if [ "$prev" = --scale ]; then scale=$a; fi
  prev=$a
done
target/release/workbench tables --scale "$scale"
target/release/workbench figures --scale "$scale"
# The paper (macros and the claims audit from data/, then
# paper/build/main.pdf) and the browsable report of everything above (not
# committed; open its index), side by side: LaTeX runs on one core, and
# neither reads what the other writes.
target/release/workbench paper &
paper=$!
report_status=0
target/release/workbench report || report_status=$?
paper_status=0
wait "$paper" || paper_status=$?
if [ "$paper_status" -ne 0 ]; then echo "quick: workbench paper failed (exit $paper_status)" >&2; fi
if [ "$report_status" -ne 0 ]; then echo "quick: workbench report failed (exit $report_status)" >&2; fi
[ "$paper_status" -eq 0 ] && [ "$report_status" -eq 0 ]
