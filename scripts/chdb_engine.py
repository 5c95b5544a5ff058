#!/usr/bin/env python3
"""Upstream ClickHouse in process (chDB), driven by the throughput experiment.

The workbench's load driver (`datastore-server cell`, experiment throughput)
starts this script and speaks JSON lines over stdin/stdout:

  -> {"cmd": "load", "parquet": PATH, "create": SQL}
  <- {"rows": N, "seconds": S}
  -> {"cmd": "run", "sql": SQL, "clients": C, "seconds": S, "max_threads": M}
  <- {"latencies": [s, ...], "elapsed": S, "rows": [[...], ...]}
  -> {"cmd": "quit"}

`run` is the same closed loop as the driver's own clients: C threads, one
cursor each, each sending its next query when the last has answered, until
S seconds have passed; `rows` is the first answer (for the equality check).
M = 0 leaves ClickHouse's max_threads at its default (one per core).
The first line printed is {"ready": true, "version": ...} or, when chDB is
missing, {"ready": false, "reason": ...}.
"""
import json
import sys
import threading
import time


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main():
    try:
        import chdb
    except ImportError as e:  # the peer is optional: say why it is absent
        reply({"ready": False, "reason": f"chdb is not importable ({e}); run scripts/setup.sh --peers"})
        return
    con = chdb.connect(":memory:")
    cur = con.cursor()
    cur.execute("SELECT version()")
    reply({"ready": True, "version": str(cur.fetchall()[0][0]), "chdb": chdb.__version__})
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req.get("cmd")
        if cmd == "quit":
            break
        if cmd == "load":
            t0 = time.monotonic()
            cur.execute(req["create"])
            cur.execute(f"INSERT INTO t SELECT * FROM file('{req['parquet']}', Parquet)")
            cur.execute("OPTIMIZE TABLE t FINAL")
            cur.execute("SELECT count() FROM t")
            reply({"rows": int(cur.fetchall()[0][0]), "seconds": time.monotonic() - t0})
        elif cmd == "run":
            reply(run(con, req))
        else:
            reply({"error": f"unknown command {cmd!r}"})


def run(con, req):
    sql = req["sql"]
    if req.get("max_threads", 0) > 0:
        sql += f" SETTINGS max_threads = {int(req['max_threads'])}"
    clients = int(req["clients"])
    first = con.cursor()
    first.execute(sql)
    rows = [list(r) for r in first.fetchall()]
    lats = [[] for _ in range(clients)]
    errors = []

    def client(out):
        c = con.cursor()
        try:
            while time.monotonic() < deadline:
                t = time.monotonic()
                c.execute(sql)
                c.fetchall()
                out.append(time.monotonic() - t)
        except Exception as e:  # reported, not swallowed
            errors.append(repr(e))

    start = time.monotonic()
    deadline = start + float(req["seconds"])
    threads = [threading.Thread(target=client, args=(lats[i],)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    if errors:
        return {"error": errors[0]}
    return {"latencies": [x for l in lats for x in l], "elapsed": elapsed, "rows": rows}


if __name__ == "__main__":
    main()
