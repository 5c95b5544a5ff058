#!/usr/bin/env python3
"""Every file the workbench writes opens, unchanged, in the tools of its format.

Run by the test command (scripts/test.sh) from the project's .venv, after the
release build:

- Parquet: a fresh `datastore load --parquet` export, and the fresh
  `records.parquet` files the end-to-end test leaves in target/tmp/interop
  (alloc-profile's, with a column that is null where jemalloc has no counts,
  and transport-alloc's), read by Python polars, pyarrow and DuckDB, each to
  the same values and types (the export's `ts` a timestamp in all three).
- pprof: a committed trace through `workbench trace export --format pprof`,
  then Debian's `go tool pprof -top`: its totals are the trace's, and no
  function name starts with `::` (what pprof's simplification left of a Rust
  name before the export named functions by plain paths).

Exits non-zero naming the file and the reader at fault.
"""

import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import duckdb
import polars as pl
import pyarrow.parquet as pq

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "notebooks"))
import columns  # noqa: E402 (generated from the record types: `workbench columns`)

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = ROOT / "target" / "release"

# The export's schema as each reader must see it (server::workload::write_parquet).
EXPORT_SCHEMA = {
    "id": pl.UInt64,
    "user_id": pl.UInt32,
    "ts": pl.Datetime("ms", "UTC"),
    "value": pl.Float64,
    "category": pl.String,
}


def fail(what: str) -> None:
    print(f"interop: {what}", file=sys.stderr)
    sys.exit(1)


def three_readers(path: pathlib.Path) -> dict[str, pl.DataFrame]:
    """The file as polars, pyarrow and DuckDB read it, each as a polars frame."""
    frames = {}
    for name, read in [
        ("polars", lambda: pl.read_parquet(path)),
        ("pyarrow", lambda: pl.from_arrow(pq.read_table(path))),
        ("duckdb", lambda: duckdb.sql(f"SELECT * FROM read_parquet('{path}')").pl()),
    ]:
        try:
            frames[name] = read()
        except Exception as e:  # noqa: BLE001 - the reader's own message is the finding
            fail(f"{path}: {name} cannot read it: {str(e).splitlines()[0]}")
    return frames


def same_values(path: pathlib.Path, frames: dict[str, pl.DataFrame]) -> None:
    base = frames["polars"]
    for name, df in frames.items():
        if df.columns != base.columns or df.height != base.height:
            fail(f"{path}: {name} reads {df.height} rows of {df.columns}, polars {base.height} of {base.columns}")
        for col in base.columns:
            a, b = base[col], df[col]
            # DuckDB widens timestamps to microseconds with the session's zone:
            # the same instants, compared as UTC epoch milliseconds.
            if a.dtype.is_temporal() or b.dtype.is_temporal():
                a = a.dt.convert_time_zone("UTC").dt.epoch("ms") if a.dtype.is_temporal() else a
                b = b.dt.convert_time_zone("UTC").dt.epoch("ms") if b.dtype.is_temporal() else b
            if a.dtype != b.dtype and a.dtype.is_numeric() and b.dtype.is_numeric():
                b = b.cast(a.dtype)
            if not a.equals(b):
                fail(f"{path}: column `{col}` differs between polars ({a.dtype}) and {name} ({b.dtype})")


def check_export(tmp: pathlib.Path) -> None:
    out = tmp / "t.parquet"
    subprocess.run(
        [BIN / "datastore", "load", "--data", tmp / "db", "--rows", "20000", "--parquet", out],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    frames = three_readers(out)
    got = dict(frames["polars"].schema)
    if got != EXPORT_SCHEMA:
        fail(f"{out}: polars reads the schema {got}, expected {EXPORT_SCHEMA}")
    for name in ("pyarrow", "duckdb"):
        if not frames[name]["ts"].dtype.is_temporal():
            fail(f"{out}: {name} reads `ts` as {frames[name]['ts'].dtype}, not a timestamp")
    same_values(out, frames)
    print(f"interop: {out.name}: 20000 rows, same values and types in polars, pyarrow and DuckDB")


def check_records() -> None:
    fresh = sorted((ROOT / "target" / "tmp" / "interop").glob("*.parquet"))
    if not fresh:
        fail("no fresh records under target/tmp/interop (the end-to-end test writes them: run the tests first)")
    for path in fresh:
        frames = three_readers(path)
        same_values(path, frames)
        typed_as_generated(path, frames["polars"])
        nulls = sum(frames["polars"][c].null_count() for c in frames["polars"].columns)
        print(
            f"interop: {path.name}: {frames['polars'].height} records, {nulls} nulls, same in polars, pyarrow and DuckDB;"
            f" every column of the type notebooks/columns.py gives it"
        )


def typed_as_generated(path: pathlib.Path, df: pl.DataFrame) -> None:
    """Fresh records hold the columns the generated module names, each
    stored as the type it declares (a column no record filled may be null)."""
    cls = columns.BY_EXPERIMENT.get(path.stem)
    if cls is None:
        fail(f"{path}: no experiment {path.stem!r} in notebooks/columns.py")
    for name, dtype in df.schema.items():
        want = cls.SCHEMA.get(name)
        if want is None:
            fail(f"{path}: column `{name}` is not a field of {cls.__name__} (notebooks/columns.py)")
        if dtype != want and dtype != pl.Null and df[name].null_count() != df.height:
            fail(f"{path}: column `{name}` is stored as {dtype}; {cls.__name__} declares {want}")


def check_pprof(tmp: pathlib.Path) -> None:
    go = shutil.which("go")
    if go is None:
        fail("`go` not found (Debian's golang-go, installed by scripts/setup.sh)")
    runs = sorted((ROOT / "data" / "alloc-profile").glob("quick-*"))
    if runs:  # a run's traces are one archive until unpacked
        subprocess.run([BIN / "workbench", "unpack", runs[-1]], check=True, stdout=subprocess.DEVNULL)
    traces = sorted(runs[-1].glob("traces/json-rpc-p64-dhat*.json")) if runs else []
    if not traces:
        fail("no committed json-rpc trace under data/alloc-profile/quick-*/traces")
    out = tmp / "trace.pb.gz"
    subprocess.run([BIN / "workbench", "trace", "export", traces[-1], "-o", out], check=True, stdout=subprocess.DEVNULL)
    top = subprocess.run(
        [go, "tool", "pprof", "-top", "-nodecount=100000", "-sample_index=alloc_space", out],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = [line.split(None, 5) for line in top.splitlines() if re.match(r"^\s*[0-9.]+[kMG]?B?\s+[0-9.]+%", line)]
    names = [r[5] for r in rows if len(r) == 6]
    if not names:
        fail(f"go tool pprof -top printed no rows for {out}:\n{top}")
    bad = [n for n in names if n.startswith("::")]
    if bad:
        fail(f"go tool pprof -top shows {len(bad)} names that start with `::`, e.g. {bad[:3]}")
    print(f"interop: {traces[-1].name} in go tool pprof -top: {len(names)} functions, none starting with `::`")


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        check_export(tmp)
        check_records()
        check_pprof(tmp)


if __name__ == "__main__":
    main()
