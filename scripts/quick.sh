#!/usr/bin/env bash
# The main job: the quick suite (every spec in experiments/ at quick scale),
# then tables (paper/generated/) and figures (figures/) from the new data.
# Pass `--scale full` and spec names for the papers' scales, e.g.
#   scripts/quick.sh heap-growth --scale full
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
if [ $# -eq 0 ]; then set -- quick; fi
cargo run --release -p workbench -- run "$@"
if [ "$1" = quick ]; then
  # The datastore benchmark at quick scale (1M rows; --rows 10000000 for the paper's).
  dir=$(mktemp -d)
  ts=$(date -u +%Y%m%dT%H%M%SZ)
  mkdir -p data/datastore-bench
  cargo run --release -p datastore -- bench --data "$dir/db" --rows 1000000 --runs 10 \
    --json "data/datastore-bench/quick-$ts.json" | tee "data/datastore-bench/quick-$ts.txt"
  rm -rf "$dir"
fi
