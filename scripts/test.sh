#!/usr/bin/env bash
# The test command: formatting, lints, and every test, in the release profile
# (the same profile as the main job, so polars compiles once).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each phase's wall time, printed at the end (pass or fail) so that a slow
# phase shows on any machine, CI included.
phases=()
phase_name=""
phase_start=$SECONDS
test_start=$SECONDS
end_phase() {
    if [ -n "$phase_name" ]; then
        phases+=("$(printf '%6ds  %s' $((SECONDS - phase_start)) "$phase_name")")
    fi
}
step() { end_phase; phase_name="$*"; phase_start=$SECONDS; echo; echo "==> $*"; }
print_phases() {
    local status=${1:-$?}
    end_phase
    phase_name=""
    echo
    echo "==> time by phase ($([ $status -eq 0 ] && echo passed || echo "FAILED, exit $status"))"
    printf '%s\n' "${phases[@]}"
    printf '%6ds  total\n' $((SECONDS - test_start))
}
trap print_phases EXIT

step "setup (scripts/setup.sh: apt, PyPI, tools)"
# The Python environment (pip) installs beside the lints and the build:
# only the notebooks check, at the end, needs it (python_env_wait).
WB_PYTHON_ENV=background
# shellcheck source=scripts/setup.sh
source scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check
step "module graphs (no cycle in any crate)"
python3 scripts/modgraph.py
step "build the tests (release profile)"
# The tests' build first, so that the check below can follow it. Its
# per-crate times are written (`--timings`: target/cargo-timings/), so that
# a slow cold build shows where its time went on any machine, CI included.
cargo test --release --workspace --no-run --timings
# The main job builds with `cargo build` (scripts/quick.sh), which must
# compile nothing the tests' build did not: a dev-dependency that turns on a
# feature of a shared crate (proptest's `fork` did, through rustix and every
# polars crate) makes each command compile it again after the other.
# Nothing to compile, this takes a second. It also writes cargo's dep-info
# beside each binary (`target/release/<bin>.d`, which a test build does not),
# which the fingerprint test reads as the runner reads a variant's.
step "the main job's build within the tests' (cargo build compiles nothing)"
build_log=$(cargo build --release --workspace 2>&1) || { echo "$build_log"; exit 1; }
if grep -q '^ *Compiling' <<<"$build_log"; then
    echo "$build_log" | grep '^ *Compiling'
    echo "test: \`cargo build --release --workspace\` compiled the crates above after the tests' build;" \
        "a dev-dependency changes a shared crate's features (cargo tree -e features -i CRATE shows which)" >&2
    exit 1
fi
step "tests (release profile)"
# PERF (test time): cargo-nextest runs the test binaries' tests side by side
# on both cores (.config/nextest.toml: the longest first, the timing test
# alone), where `cargo test` runs one binary at a time; its build is
# `cargo test --no-run`'s, so nothing compiles twice. Doc tests are cargo
# test's alone. Without nextest (it ships with this project's toolchain
# image, not with every rustup), `cargo test` runs the same tests.
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --release --workspace --no-fail-fast
    cargo test --release --workspace --doc
else
    echo "test: cargo-nextest not found; running the tests one binary at a time (cargo test)"
    cargo test --release --workspace
fi
# The probe's per-variant tests need the allocator feature on; one at a time
# because dhat and jemalloc are both global allocators. NOTE: features are
# resolved over the workspace (`--workspace --test …`), as the build above
# did, so only the probe and its allocator compile again; `-p probe`
# resolved them over the probe alone and recompiled its dependencies.
step "probe tests, dhat build"
cargo test --release --workspace --features probe/dhat --test dhat_counts --test dhat_sides --test dhat_calls
step "probe tests, events build"
cargo test --release --workspace --features probe/events --test events_record
step "probe tests, jemalloc build"
cargo test --release --workspace --features probe/jemalloc --test jemalloc_counts
step "probe tests, jemalloc build without statistics"
cargo test --release --workspace --features probe/jemalloc-plain --test jemalloc_plain
step "probe tests, jemalloc sampling build"
cargo test --release --workspace --features probe/jemalloc-prof --test jemalloc_prof
# The server's sampling build answering `heap_profile` (every other build's
# 501 is tested in the workspace's run above); the build the quick suite's
# profiler-cost cells run.
step "server tests, jemalloc sampling build (heap_profile)"
cargo test --release --workspace --features server/jemalloc-prof --test heap_profile
# The allocation gate: the small dhat suite's exact counts against the
# committed baseline (the dhat builds are the tests' own, so nothing
# compiles); fails on any count that moved, naming the sites.
step "allocation gate (workbench gate, experiments/gate/baseline.txt)"
target/release/workbench gate
# The checks after the tests, side by side. PERF (test time): each
# leaves a core idle most of its time (Slurm's daemons and a tiny spec,
# LaTeX, a site written once and then Chromium waiting on its driver, a
# Python kernel): one after another they took 157 s of a cold run
# (2026-12-03), about as long as the longest of them plus the rest's CPU.
# None but clippy compiles anything, none times anything (the Slurm test
# compares exact counts), and none writes where another reads: the paper and the site read
# a worktree of HEAD (below), the notebooks this tree's data/. Each writes
# its output to a log, printed whole when all have ended, and its wall time
# is its own phase.
#
# `workbench run --slurm` for real: a one-node cluster on this machine, a
# tiny spec through it, compared with a local run; the cluster is stopped
# whatever the outcome.
# NOTE: its cargo (the test's build check, and the runner building the
# subject) waits for clippy's lock on the build directory: it starts when
# clippy ends, and the other checks fill the time.
check_slurm() {
    slurm_dir="$(mktemp -d)"
    trap 'bash scripts/slurm-cluster.sh stop "$slurm_dir"; rm -rf "$slurm_dir"' EXIT
    bash scripts/slurm-cluster.sh start "$slurm_dir"
    SLURM_CONF="$slurm_dir/slurm.conf" cargo test --release --workspace --test slurm -- --nocapture
}
# Lints, beside the checks that leave a core idle. PERF (test time): on its
# own before the build it took 106-146 s of every cold run (its own check of
# every dependency: a check's metadata is not a build's), while the checks
# here left a core idle most of their 89-157 s. In the release profile, so
# that it reuses the build's build-script outputs and proc macros.
check_clippy() {
    cargo clippy --release --workspace --all-targets -- -D warnings
}
# The paper: tables, macros and claims from the committed data, then the PDF;
# `workbench paper` fails on a LaTeX error, a missing file or an undefined
# reference. Generated files that differ from the committed ones mean the
# committed tables are stale. NOTE: in a worktree of HEAD, so that the main
# job's fresh (uncommitted) data in this tree is not mistaken for staleness.
check_paper() {
    target/release/workbench --root "$wt" tables >/dev/null
    target/release/workbench --root "$wt" tables --scale full >/dev/null
    target/release/workbench --root "$wt" paper
    # Layout: no box wider than the text by more than 10 pt (a table past
    # the margin), named by where LaTeX found it.
    local wide
    wide=$(grep -E '^Overfull \\hbox \(([0-9]+\.[0-9]+)pt too wide\)' "$wt/paper/build/main.log" \
        | awk '{ w = $3; sub(/^\(/, "", w); sub(/pt$/, "", w); if (w + 0 > 10) print }' || true)
    if [ -n "$wide" ]; then
        echo "$wide"
        echo "test: the paper has boxes more than 10 pt wider than the text (paper/build/main.log)" >&2
        return 1
    fi
    if [ -n "$(git -C "$wt" status --porcelain -- paper/generated)" ]; then
        git -C "$wt" status --short -- paper/generated
        echo "test: paper/generated differs from what the committed data generates; run workbench tables/paper and commit" >&2
        return 1
    fi
}
# The report site from the same committed data, in a real browser: every
# link of every page resolving, the pages (one trace page in eight) without
# a console error, a table sorting, a hover, a flame graph zooming, pages
# without JavaScript.
check_report() {
    target/release/workbench --root "$wt" report --out "$wt_parent/report"
    python3 scripts/report_browser_check.py "$wt_parent/report"
}
check_notebooks() {
    .venv/bin/python scripts/notebooks.py
}
# Files in the readers of their formats: a fresh Parquet export and fresh
# records in Python polars, pyarrow and DuckDB; a trace's pprof export in
# `go tool pprof -top`.
check_interop() {
    .venv/bin/python scripts/interop.py
}
side_by_side=(
    "cargo clippy --release --all-targets -D warnings|check_clippy"
    "slurm: a tiny spec as a job array on a one-node cluster|check_slurm"
    "paper (workbench tables, claims, paper) from HEAD's data, in a worktree|check_paper"
    "report site (workbench report) in headless Chromium|check_report"
    "notebooks (executed headless against data/)|check_notebooks"
    "interop: Parquet in polars, pyarrow, DuckDB; pprof in go tool pprof|check_interop"
)
step "the Python environment (installing beside the build since setup)"
python_env_wait
end_phase
phase_name=""
echo
echo "==> side by side: clippy, slurm, paper, report site, notebooks, interop"
side_start=$SECONDS
wt_parent="$(mktemp -d)"
wt="$wt_parent/head"
git worktree add --detach --quiet "$wt" HEAD
trap 'st=$?; kill $(jobs -pr) 2>/dev/null || true; wait || true; git worktree remove --force "$wt" >/dev/null 2>&1 || true; rm -rf "$wt_parent"; print_phases "$st"' EXIT
for i in "${!side_by_side[@]}"; do
    (
        start=$SECONDS
        set +e
        (set -e; "${side_by_side[$i]#*|}") >"$wt_parent/check-$i.log" 2>&1
        echo "$? $((SECONDS - start))" >"$wt_parent/check-$i.status"
    ) &
done
wait
failed=0
for i in "${!side_by_side[@]}"; do
    name="${side_by_side[$i]%%|*}"
    read -r st secs <"$wt_parent/check-$i.status"
    echo
    echo "==> $name ($([ "$st" -eq 0 ] && echo passed || echo "FAILED, exit $st"), ${secs} s)"
    cat "$wt_parent/check-$i.log"
    phases+=("$(printf '%6ds  %s (side by side)' "$secs" "$name")")
    [ "$st" -eq 0 ] || failed=1
done
phase_name="side by side, all six"
phase_start=$side_start
[ "$failed" -eq 0 ]
