#!/usr/bin/env python3
"""Upstream ClickHouse in process (chDB), one client per process.

The throughput experiment's load driver (`datastore-load --cell`) starts one
process of this script to load the table, then one per concurrent client,
and speaks JSON lines with each over stdin/stdout. The first line printed is
{"ready": true, "version": ..., "chdb": ...} or, when chDB is missing,
{"ready": false, "reason": ...}.

  -> {"cmd": "load", "dir": D, "parquet": P, "create": SQL}
  <- {"rows": N, "seconds": S, "parts": K}        (then the process exits)
  -> {"cmd": "open", "from": D, "dir": E}
  <- {"parts": K}
  -> {"cmd": "info", "max_threads": M}
  <- {"max_threads": EFFECTIVE}
  -> {"cmd": "run", "sql": SQL, "seconds": S, "max_threads": M}
  <- {"latencies": [s, ...], "engine_ms": [ms, ...], "answers": N,
      "differing": K, "first": [[...], ...]}
  -> {"cmd": "quit"}

Why a process per client: chDB runs one query at a time per process (one
embedded server, one connection), and a second process cannot open the
same data directory. ClickHouse's parts are immutable once written, so each
client process opens its own copy of the loaded directory made of hard
links (`open`): no bytes are copied, the page cache holds the files once,
and every client scans at once, as a ClickHouse server would serve them.

`run` is one client's closed loop: it sends its next query when the last
has answered, until S seconds have passed (one query at least). Every answer is compared with
the process's first (counts exact, floats to 1e-9 relative, in order where
the query orders them, as sets otherwise) and
`differing` counts those that were not equal; `first` is compared with the
other engine's answer by the driver. `engine_ms` is ClickHouse's own
elapsed time for each query (the query result's `elapsed()`), beside the
client-side latency. M = 0 leaves max_threads at its default (one per core).
"""
import json
import os
import shutil
import sys
import time


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    try:
        import chdb
    except ImportError as e:  # the peer is optional: say why it is absent
        reply({"ready": False, "reason": f"chdb is not importable ({e}); run scripts/setup.sh with WB_PEERS=1"})
        return
    reply({"ready": True, "version": str(chdb.engine_version), "chdb": chdb.__version__})
    con = None
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req.get("cmd")
        try:
            if cmd == "quit":
                break
            if cmd == "load":
                reply(load(chdb, req))
                break
            if cmd == "open":
                # symlinks=True: an Atomic database links metadata/ and data/ to
                # store/ by relative symlinks, which must stay links.
                shutil.copytree(req["from"], req["dir"], symlinks=True, copy_function=os.link)
                con = chdb.connect(req["dir"])
                reply({"parts": parts(con)})
            elif cmd == "info":
                sql = "SELECT getSetting('max_threads')" + settings(req)
                reply({"max_threads": int(rows(con, sql)[0][0])})
            elif cmd == "run":
                reply(run(con, req))
            else:
                reply({"error": f"unknown command {cmd!r}"})
        except Exception as e:  # reported to the driver, which fails the cell
            reply({"error": f"{cmd}: {e!r}"})
    if con is not None:
        con.close()


def rows(con, sql):
    res = con.query(sql, "JSONCompact")
    return json.loads(res.bytes())["data"]


def parts(con):
    return int(rows(con, "SELECT count() FROM system.parts WHERE table = 't' AND active")[0][0])


def settings(req):
    m = int(req.get("max_threads", 0))
    return f" SETTINGS max_threads = {m}" if m > 0 else ""


def load(chdb, req):
    t0 = time.monotonic()
    con = chdb.connect(req["dir"])
    cur = con.cursor()
    cur.execute(req["create"])
    cur.execute(f"INSERT INTO t SELECT * FROM file('{req['parquet']}', Parquet)")
    cur.execute("OPTIMIZE TABLE t FINAL")
    n = int(rows(con, "SELECT count() FROM t")[0][0])
    k = parts(con)
    con.close()
    return {"rows": n, "seconds": time.monotonic() - t0, "parts": k}


def close(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return a == b


def same(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(close(p, q) for p, q in zip(x, y)) for x, y in zip(a, b)
    )


def run(con, req):
    sql = req["sql"] + settings(req)
    # Without ORDER BY, a GROUP BY's rows come in any order (several threads
    # merge them): such answers are compared as sets, keyed by the first column.
    unordered = "ORDER BY" not in req["sql"]
    lat, engine_ms = [], []
    first, differing = None, 0
    deadline = time.monotonic() + float(req["seconds"])
    while first is None or time.monotonic() < deadline:  # one query at least
        t = time.monotonic()
        res = con.query(sql, "JSONCompact")
        data = json.loads(res.bytes())["data"]
        lat.append(time.monotonic() - t)
        if unordered:
            data.sort(key=lambda row: json.dumps(row[:1]))
        engine_ms.append(res.elapsed() * 1e3)
        if first is None:
            first = data
        elif not same(first, data):
            differing += 1
    return {"latencies": lat, "engine_ms": engine_ms, "answers": len(lat), "differing": differing, "first": first}


if __name__ == "__main__":
    main()
