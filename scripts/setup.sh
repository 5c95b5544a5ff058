# Sourced by the other scripts: checks what a fresh machine (Rust toolchain,
# gcc, Python 3.11, git) must provide and installs the few things it may lack.
# The workbench itself needs nothing outside crates.io: fonts are embedded,
# Parquet is written by polars, figures by plotters.
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
# Load tests and servers raise their own descriptor limit; do it here too.
ulimit -n 65536 2>/dev/null || true
