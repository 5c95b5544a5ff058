"""Reading data/ through its documented layout (see workbench/cli/src/lib.rs).

data/<experiment>/<scale>-<YYYYmmddTHHMMSSZ>/ holds records.parquet,
manifest.json and traces/*.dhat.json; run ids sort by time, so the latest run
is the last name. Generated tables are paper/generated/[full/]<experiment>.json
(and .md, .tex: the same values rendered).
"""
from __future__ import annotations

import json
import math
import pathlib

import polars as pl

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


def records(run: pathlib.Path) -> pl.DataFrame:
    """A run's records. A record may stand for `repeat` identical ones
    (transport-alloc writes a run of equal round trips as one); datasets
    without the column get it as 1, so every mean can weigh by it (`mean`)."""
    df = pl.read_parquet(run / "records.parquet")
    if "repeat" not in df.columns:
        df = df.with_columns(pl.lit(1, dtype=pl.UInt64).alias("repeat"))
    return df


def mean(col: str) -> pl.Expr:
    """The mean of `col` over what the records stand for: each weighs its `repeat`."""
    weight = pl.col("repeat").filter(pl.col(col).is_not_null())
    return ((pl.col(col) * pl.col("repeat")).sum() / weight.sum()).alias(col)


def manifest(run: pathlib.Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


def table(experiment: str, scale: str = "quick") -> dict:
    """The generated table of `experiment` (`paper/generated/[full/]<name>.json`,
    written with the Markdown and LaTeX from the same values): name, caption,
    header, rows of cells {"text": headline, "range": [min, max] or None}, source."""
    path = ROOT / "paper" / "generated" / ("" if scale == "quick" else scale) / f"{experiment}.json"
    return json.loads(path.read_text())


def cell(experiment: str, row: tuple[str, str], column: str, scale: str = "quick") -> str:
    """The headline text of one table cell: the row whose first two cells read `row`."""
    t = table(experiment, scale)
    col = t["header"].index(column)
    for r in t["rows"]:
        if (r[0]["text"], r[1]["text"]) == row:
            return r[col]["text"]
    raise KeyError(f"{row} not in {experiment}")


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
