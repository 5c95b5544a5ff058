#!/usr/bin/env bash
# dhat traces of the datastore server, one per workload query, for
# `workbench trace top|diff|tree|view`. For each query of `datastore queries`,
# the server's dhat build serves a freshly loaded table, a client runs the
# query COUNT times (one connection each, as `datastore-load client` does),
# and SIGTERM makes the server exit and write its trace.
#   scripts/server-traces.sh           # quick: 100,000 rows, 20 queries each
#   scripts/server-traces.sh --full    # the paper's 10,000,000 rows, 10 each
# Output: data/server-traces/<scale>-<UTC>/traces/<query>-dhat-r0.dhat.json
# and a manifest.txt (revision, rows, count, commands).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
scale=quick rows=100000 count=20
if [ "${1:-}" = --full ]; then scale=full rows=10000000 count=10; fi
if [ -n "$(git status --porcelain --untracked-files=no)" ] && [ "${ALLOW_DIRTY:-}" != 1 ]; then
    echo "server-traces: the tree has uncommitted changes; commit first (or ALLOW_DIRTY=1)" >&2
    exit 1
fi
cargo build --release --workspace
# The dhat server, with full function paths in its frames (see variants.rs),
# in its own target directory; run from a private copy so that no build can
# replace it while it runs (its frames are read from disk at exit).
CARGO_PROFILE_RELEASE_DEBUG=limited cargo build --release -p server --bin datastore-server \
    --features dhat --target-dir target/variants/server-dhat
work=$(mktemp -d)
trap 'kill "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
cp target/variants/server-dhat/release/datastore-server "$work/server-dhat"
ts=$(date -u +%Y%m%dT%H%M%SZ)
out="data/server-traces/.tmp-$scale-$ts"
mkdir -p "$out/traces"
target/release/datastore load --data "$work/db" --rows "$rows" >/dev/null
{
    echo "revision: $(git rev-parse HEAD)$( [ -n "$(git status --porcelain --untracked-files=no)" ] && echo ' (dirty)')"
    echo "rows: $rows; queries per trace: $count, one connection each; server: dhat build, debug = limited"
    echo "date: $ts; rustc: $(rustc --version); kernel: $(uname -r); cores: $(nproc)"
} > "$out/manifest.txt"
while IFS=$'\t' read -r name sql; do
    trace="$out/traces/$name-dhat-r0.dhat.json"
    "$work/server-dhat" serve --data "$work/db" --listen 127.0.0.1:0 --trace "$trace" > "$work/listen" 2> "$work/server.log" &
    pid=$!
    for _ in $(seq 100); do grep -q '^listening on' "$work/listen" && break; sleep 0.1; done
    addr=$(sed -n 's/^listening on //p' "$work/listen")
    [ -n "$addr" ] || { echo "server-traces: the server did not start; see its log:" >&2; cat "$work/server.log" >&2; exit 1; }
    for i in $(seq "$count"); do
        target/release/datastore-load client "$addr" "$sql" > /dev/null
        printf '\r%s: %d/%d queries' "$name" "$i" "$count" >&2
    done
    kill -TERM "$pid"; wait "$pid"; pid=
    echo "  $trace" >&2
    echo "$name: $sql" >> "$out/manifest.txt"
done < <(target/release/datastore queries)
final="data/server-traces/$scale-$ts"
mv "$out" "$final"
echo "wrote $final; review with: target/release/workbench trace top $final"
