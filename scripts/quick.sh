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
