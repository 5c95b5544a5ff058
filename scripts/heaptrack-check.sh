#!/usr/bin/env bash
# The events build's timeline against an independent heap profiler:
# heaptrack (Debian's package) on the plain build of the same cell, one codec
# cell and one server cell, each printed beside the events file's totals and
# highest point. Usage: scripts/heaptrack-check.sh [OUT_DIR]
#
# Why the two can differ, and by how much, is printed with the numbers:
# heaptrack also counts what runs before the probe starts (the runtime's
# start-up) and its own libstdc++ emergency pool (one block of about 73 KiB,
# allocated when its preload library loads); a server's wake-ups vary run to
# run (the allocation gate's determinism map).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-/tmp/heaptrack-check}"
command -v heaptrack >/dev/null || { echo "heaptrack: not installed (apt-get install heaptrack)" >&2; exit 1; }
lib=/usr/lib/heaptrack
[ -f "$lib/libheaptrack_preload.so" ] || { echo "$lib/libheaptrack_preload.so: not found" >&2; exit 1; }
rm -rf "$out"; mkdir -p "$out/work"
wb="$root/target/release/workbench"
cargo build --release -q --workspace
echo "== the events build (workbench run, quick scale, into $out/data)"
"$wb" run heap-growth server-heap-growth --scale quick --data "$out/data" --no-report --allow-dirty >/dev/null

echo "== codec cell: json-rpc, heap-growth, 50,000 messages"
cell='{"codec":"json-rpc","experiment":"heap-growth","messages":50000,"payload":0,"sample_every":500,"seed":42}'
heaptrack -o "$out/codec" "$root/target/release/subject" --cell "$cell" >/dev/null 2>"$out/codec.log"
# heaptrack compresses with zstd where it can, else gzip.
heaptrack_print -f "$(ls "$out"/codec.* | grep -v '\.log$' | head -1)" 2>/dev/null | grep -E "^(calls to allocation|peak heap)" | sed 's/^/  heaptrack: /'
"$wb" unpack "$out"/data/heap-growth/quick-* "$out"/data/server-heap-growth/quick-* >/dev/null
"$wb" trace timeline "$out"/data/heap-growth/quick-*/traces/json-rpc-p0-events-r0.events.json | sed -n '2,4p' | sed 's/^/  events:    /'

echo "== server cell: server-heap-growth, the query mix, 300 queries"
# The plain server under heaptrack's preload library, exec'd so that the
# load driver's SIGTERM reaches the server itself.
cat >"$out/server.sh" <<EOF
#!/bin/sh
p="$out/pipe.\$\$"
mkfifo "\$p"
$lib/libexec/heaptrack_interpret < "\$p" | gzip -c > "$out/server.\$\$.gz" &
export LD_PRELOAD=$lib/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT="\$p"
exec "$root/target/release/datastore-server" "\$@"
EOF
chmod +x "$out/server.sh"
cell='{"experiment":"server-heap-growth","seed":42,"params":{"workloads":["mix"],"queries":20000,"mix_queries":300,"samples":50,"rows":10000},"work_dir":"'"$out/work"'"}'
WORKBENCH_SERVER_BIN="$out/server.sh" "$root/target/release/datastore-load" --cell "$cell" >/dev/null 2>"$out/server.log"
sleep 1
heaptrack_print -f "$out"/server.*.gz 2>/dev/null | grep -E "^(calls to allocation|peak heap)" | sed 's/^/  heaptrack: /'
"$wb" trace timeline "$out"/data/server-heap-growth/quick-*/traces/*-events-r0-mix.events.json | sed -n '2,4p' | sed 's/^/  events:    /'
