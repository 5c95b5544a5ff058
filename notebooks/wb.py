"""Reading data/ through its documented layout (see workbench/runner/src/lib.rs).

data/<experiment>/<scale>-<YYYYmmddTHHMMSSZ>/ holds records.parquet,
manifest.json and its traces as one traces.tar.zst (`traces` unpacks it into
traces/, which git ignores); run ids sort by time, so the latest run is the
last name. Generated tables are paper/generated/[full/]<experiment>.json
(and .md, .tex: the same values rendered).

A dataset's columns are typed by `columns.py`, generated from the record
types (`workbench columns`): `records` checks a dataset against its
experiment's class and casts it, and a notebook names a column as
`columns.AllocProfile.allocs`, never by a string.
"""
from __future__ import annotations

import json
import math
import pathlib

import polars as pl

import columns

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def latest(experiment: str, scale: str = "quick", run: str | None = None) -> pathlib.Path:
    """The newest finished run of `experiment` at `scale`, or the one named."""
    base = DATA / experiment
    if run is not None:
        return base / run
    runs = sorted(p for p in base.glob(f"{scale}-*") if (p / "manifest.json").exists())
    if not runs:
        raise FileNotFoundError(f"no {scale} run of {experiment} under {base}")
    return runs[-1]


def traces(run: pathlib.Path) -> pathlib.Path:
    """The run's traces/ directory (plain JSON), unpacked from its
    traces.tar.zst on first use, as the workbench's own readers do
    (`workbench unpack`); a run measured before the archive has it already."""
    d = run / "traces"
    archive = run / "traces.tar.zst"
    if d.is_dir() or not archive.is_file():
        return d
    import shutil
    import tarfile
    import tempfile

    import zstandard

    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".traces-", dir=run))
    try:
        with archive.open("rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as z:
            with tarfile.open(fileobj=z, mode="r|") as tar:
                for member in tar:
                    name = member.name.removeprefix("traces/")
                    if not member.isfile() or not name or "/" in name or name in (".", ".."):
                        raise ValueError(f"{archive}: entry {member.name!r} is not a file under traces/")
                    (tmp / name).write_bytes(tar.extractfile(member).read())
        try:
            tmp.rename(d)
        except OSError:
            if not d.is_dir():  # another reader put it there first, else a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return d


def columns_of(run: pathlib.Path) -> type:
    """The generated class of the experiment whose dataset `run` is."""
    experiment = run.parent.name
    try:
        return columns.BY_EXPERIMENT[experiment]
    except KeyError:
        raise KeyError(f"{run}: no experiment {experiment!r} in columns.py; known: {sorted(columns.BY_EXPERIMENT)}") from None


def typed(df: pl.DataFrame, cls: type, path: pathlib.Path | str) -> pl.DataFrame:
    """`df` checked against `cls` (a class of columns.py) and cast to its
    types: a column the record type does not have is an error naming it; a
    field no record carried is a column of nulls (or of its default, as
    `repeat`'s 1: a record may stand for `repeat` identical ones, and every
    mean weighs by it, `mean`)."""
    unknown = [c for c in df.columns if c not in cls.SCHEMA]
    if unknown:
        raise ValueError(
            f"{path}: columns {unknown} are not fields of {cls.__name__} ({cls.__doc__.splitlines()[0]}); "
            "if the record type changed, `workbench columns` writes notebooks/columns.py again"
        )
    missing = [n for n in cls.SCHEMA if n not in df.columns]
    return df.with_columns(
        [pl.col(n).cast(t) for n, t in cls.SCHEMA.items() if n in df.columns]
        + [pl.lit(cls.DEFAULTS.get(n), dtype=cls.SCHEMA[n]).alias(n) for n in missing]
    ).with_columns([pl.col(n).fill_null(v) for n, v in cls.DEFAULTS.items()])


def records(run: pathlib.Path) -> pl.DataFrame:
    """A run's records, typed by its experiment's class in columns.py."""
    path = run / "records.parquet"
    return typed(pl.read_parquet(path), columns_of(run), path)


def mean(col: pl.Expr) -> pl.Expr:
    """The mean of `col` over what the records stand for: each weighs its `repeat`."""
    repeat = columns.TransportAlloc.repeat
    weight = repeat.filter(col.is_not_null())
    return ((col * repeat).sum() / weight.sum()).alias(col.meta.output_name())


def manifest(run: pathlib.Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def table(experiment: str, scale: str = "quick") -> dict:
    """The generated table of `experiment` (`paper/generated/[full/]<name>.json`,
    written with the Markdown and LaTeX from the same values): name, caption,
    header, rows of cells {"text": headline, "range": [min, max] or None}, source."""
    path = ROOT / "paper" / "generated" / ("" if scale == "quick" else scale) / f"{experiment}.json"
    return json.loads(path.read_text())


def cell(experiment: str, row: tuple[str, ...], column: str, scale: str = "quick") -> str:
    """The headline text of one table cell: the row found by its keys (a
    codec's registered name, a payload in bytes: what the paper's macros find
    rows by, never the rendered label), in the column headed `column`."""
    t = table(experiment, scale)
    col = t["header"].index(column)
    for r in t["rows"]:
        if tuple(c.get("key") for c in r[: len(row)]) == row:
            return r[col]["text"]
    raise KeyError(f"no row keyed {row} in {experiment}")


def assert_matches(value: float, text: str) -> None:
    """`value` rounds to the number `text` prints, at the precision printed."""
    number = text.replace(",", "").split()[0].rstrip("×")
    decimals = len(number.split(".")[1]) if "." in number else 0
    shown = float(number)
    assert math.isclose(round(value, decimals), shown, abs_tol=10 ** -decimals / 2), (value, text)
    print(f"recomputed {value:.6g}; the generated table prints {text}: equal at its precision")


def dhat_sites(trace: pathlib.Path) -> pl.DataFrame:
    """One row per allocation site of a dhat trace: bytes, blocks, lifetime."""
    d = json.loads(trace.read_text())
    return pl.DataFrame(
        {
            "bytes": [p["tb"] for p in d["pps"]],
            "blocks": [p["tbk"] for p in d["pps"]],
            "lifetime_us": [p.get("tl", 0) for p in d["pps"]],
        }
    )
