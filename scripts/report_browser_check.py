#!/usr/bin/env python3
"""The report site in a real browser: headless Chromium (Debian's package)
driven over WebDriver (chromedriver), with the standard library only.

Checks, failing with a list of what broke:
- every link, image, frame, script and style sheet of every page reachable
  from the index resolves to a file inside the file system (read from the
  HTML, without the browser);
- every page loads with no console error (warnings pass); of each
  dataset's trace pages, which share one template, only the first and then
  one in TRACE_SAMPLE are loaded;
- a table sorts by a header click (ascending, then descending);
- hovering a figure's point shows its exact value beside the pointer;
- a flame graph zooms when a frame is clicked;
- a differential allocation flame graph (an idiom against its plain codec)
  shows a frame's exact bytes and blocks before -> after under the pointer,
  and colours a frame that changed;
- with JavaScript off, a page still holds its tables, figures and links.

Usage: scripts/report_browser_check.py REPORT_DIR
"""

import html.parser
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
# PERF (test time): the trace pages are 268 of the 336 pages of the committed
# data's site and differ only in their numbers; loading every one was most of
# this check's 45 s (2026-12-03). Their links are still all checked.
TRACE_SAMPLE = 8


class Driver:
    """One WebDriver session (W3C protocol over HTTP)."""

    def __init__(self, port, javascript=True):
        self.base = f"http://127.0.0.1:{port}"
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                "--disable-dev-shm-usage", "--allow-file-access-from-files"]
        if not javascript:
            args.append("--blink-settings=scriptEnabled=false")
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}}
        self.session = self.call("POST", "/session", caps)["sessionId"]

    def call(self, method, path, body=None):
        url = self.base + path
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"WebDriver {method} {path}: {e.read().decode(errors='replace')[:400]}") from e

    def s(self, method, path, body=None):
        return self.call(method, f"/session/{self.session}{path}", body)

    def go(self, url):
        self.s("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.s("POST", "/execute/sync", {"script": script, "args": list(args)})

    def find(self, css):
        return [e[ELEMENT] for e in self.s("POST", "/elements", {"using": "css selector", "value": css})]

    def console(self):
        return self.s("POST", "/se/log", {"type": "browser"}) or []

    def close(self):
        try:
            self.s("DELETE", "")
        except Exception:
            pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    site = Path(sys.argv[1]).resolve()
    index = site / "index.html"
    if not index.is_file():
        sys.exit(f"{index}: no report here (run `workbench report --out {site}` first)")
    for tool in (CHROMIUM, CHROMEDRIVER):
        if not Path(tool).exists():
            sys.exit(f"{tool} is missing: scripts/setup.sh installs Debian's chromium and chromium-driver")
    port = free_port()
    driver_proc = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
    failures = []
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        d = Driver(port)
        try:
            pages = crawl(d, site, index, failures)
            sorting(d, site, failures)
            hover(d, site, failures)
            flame(d, site, failures)
            diff_flame(d, site, failures)
        finally:
            d.close()
        nojs = Driver(port, javascript=False)
        try:
            without_javascript(nojs, site, failures)
        finally:
            nojs.close()
    finally:
        driver_proc.terminate()
        driver_proc.wait(timeout=10)
    if failures:
        print(f"report site: {len(failures)} failure(s):")
        for f in failures[:60]:
            print(f"  {f}")
        sys.exit(1)
    print(f"report site: every link of {pages[0]} pages resolves; {pages[1]} pages load without console errors; "
          "a table sorts, a hover shows a point's exact value, a flame graph zooms, a differential flame graph shows before -> after, pages read without JavaScript")


class Links(html.parser.HTMLParser):
    """The URLs a page's HTML refers to, as (kind, url)."""

    ATTRS = {"a": "href", "link": "href", "img": "src", "iframe": "src", "script": "src"}

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        want = self.ATTRS.get(tag)
        for name, value in attrs:
            if name == want and value:
                self.urls.append((tag, value))


def crawl(d, site, index, failures):
    """Finds every page reachable from the index and checks every URL in
    each; loads each (a sample of the trace pages) and checks its console."""
    seen, queue = set(), [index]
    while queue:
        page = queue.pop()
        if page in seen:
            continue
        seen.add(page)
        links = Links()
        links.feed(page.read_text(errors="replace"))
        for kind, url in links.urls:
            parsed = urllib.parse.urlparse(url)
            if url.startswith("data:") or (not parsed.scheme and not parsed.path):
                continue
            if parsed.scheme not in ("", "file") or parsed.netloc:
                failures.append(f"{page.relative_to(site)}: {kind} leaves the file system: {url}")
                continue
            path = (page.parent / urllib.parse.unquote(parsed.path)).resolve()  # an absolute path stays one
            if not path.exists():
                failures.append(f"{page.relative_to(site)}: {kind} does not resolve: {url}")
                continue
            if path.suffix == ".html" and site in path.parents and path not in seen:
                queue.append(path)
    loaded = 0
    traces_seen = {}
    for page in sorted(seen):
        if page.parent.name == "traces":
            n = traces_seen.get(page.parent, 0)
            traces_seen[page.parent] = n + 1
            if n % TRACE_SAMPLE:
                continue
        d.go(page.as_uri())
        loaded += 1
        for entry in d.console():
            if entry.get("level") == "SEVERE":
                failures.append(f"{page.relative_to(site)}: console: {entry.get('message', '')[:200]}")
    return len(seen), loaded


def open_first_page_with(d, site, needle, failures, check):
    """Opens the first dataset page whose HTML holds `needle`; None (and a
    failure named after `check`) if there is none."""
    for p in sorted(site.glob("*/*/index.html")):
        if needle in p.read_text(errors="replace"):
            d.go(p.as_uri())
            return p
    failures.append(f"{check}: no page holds {needle!r}")
    return None


def sorting(d, site, failures):
    page = open_first_page_with(d, site, 'data-sort="', failures, "sort")
    if page is None:
        return
    # The first sortable table with a numeric column of at least three distinct values.
    found = d.js("""
        for (const [t, table] of Array.from(document.querySelectorAll('table.sortable')).entries()) {
          const heads = table.tHead.rows[0].cells;
          for (let c = 0; c < heads.length; c++) {
            const v = Array.from(table.tBodies[0].rows).map(r => r.cells[c] && r.cells[c].getAttribute('data-sort'));
            if (v.length >= 3 && v.every(x => x !== null) && new Set(v).size >= 3) return [t, c];
          }
        }
        return null;""")
    if found is None:
        failures.append(f"sort: {page.relative_to(site)} has no numeric column to sort")
        return
    t, c = found
    heads = d.find("table.sortable")
    th = d.js("return arguments[0].tHead.rows[0].cells[arguments[1]];", {ELEMENT: heads[t]}, c)
    column = "return Array.from(arguments[0].tBodies[0].rows).map(r => parseFloat(r.cells[arguments[1]].getAttribute('data-sort')));"
    for order in ("ascending", "descending"):
        d.s("POST", f"/element/{th[ELEMENT]}/click")
        vals = d.js(column, {ELEMENT: heads[t]}, c)
        want = sorted(vals, reverse=order == "descending")
        if vals != want:
            failures.append(f"sort: {page.relative_to(site)} table {t} column {c} not {order} after a click: {vals[:8]}")


def hover(d, site, failures):
    page = open_first_page_with(d, site, 'class="point"', failures, "hover")
    if page is None:
        return
    points = d.find("circle.point")
    # A point no other point covers (lines often share their first point).
    i = d.js("""
        const ps = document.querySelectorAll('circle.point');
        for (let i = 0; i < ps.length; i++) {
          ps[i].scrollIntoView({block: 'center'});
          const r = ps[i].getBoundingClientRect();
          if (document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === ps[i]) return i;
        }
        return -1;""")
    if i < 0:
        failures.append(f"hover: {page.relative_to(site)}: every point is covered by another")
        return
    title = d.js("return arguments[0].querySelector('title').textContent;", {ELEMENT: points[i]})
    d.js("arguments[0].scrollIntoView({block: 'center'});", {ELEMENT: points[i]})
    d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                                          "actions": [{"type": "pointerMove", "origin": {ELEMENT: points[i]},
                                                       "x": 0, "y": 0, "duration": 0}]}]})
    tip = d.js("const t = document.getElementById('tip'); return t ? [t.style.display, t.textContent] : null;")
    if tip is None or tip[0] != "block" or tip[1] != title:
        failures.append(f"hover: {page.relative_to(site)}: the tip shows {tip!r}, the point's title is {title!r}")
    elif "=" not in title or not any(ch.isdigit() for ch in title.split("=")[-1]):
        failures.append(f"hover: {page.relative_to(site)}: the title {title!r} holds no value")
    d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                                          "actions": [{"type": "pointerMove", "x": 1, "y": 1, "duration": 0}]}]})
    d.s("DELETE", "/actions")


def flame(d, site, failures):
    traces = sorted(site.glob("*/*/traces/*.html"))
    if not traces:
        failures.append("flame: no trace page")
        return
    page = max(traces[:40], key=lambda p: (p.with_suffix(".flame.svg").stat().st_size
                                           if p.with_suffix(".flame.svg").exists() else 0))
    d.go(page.as_uri())
    frames = d.find("iframe.flame")
    if not frames:
        failures.append(f"flame: {page.relative_to(site)} has no flame graph frame")
        return
    d.s("POST", "/frame", {"id": {ELEMENT: frames[0]}})
    target = d.js("""
        for (const g of document.querySelectorAll('#frames > g')) {
          const r = g.querySelector('rect');
          const w = parseFloat(r.getAttribute('width'));
          if (w > 2 && w < 60) return [g, w];
        }
        return null;""")
    if target is None:
        failures.append(f"flame: {page.relative_to(site)}: no frame of a zoomable width")
    else:
        g, before = target
        # The frame's group, not its rect: the label drawn over the rect is
        # part of the group, and inferno listens on the groups.
        d.s("POST", f"/element/{g[ELEMENT]}/click")
        after = d.js("""return [parseFloat(arguments[0].querySelector('rect').getAttribute('width')),
                        document.getElementById('unzoom').classList.contains('hide')];""", g)
        if not (after[0] > before and after[1] is False):
            failures.append(f"flame: {page.relative_to(site)}: a click did not zoom (width {before}% -> {after[0]}%, "
                            f"reset hidden: {after[1]})")
    d.s("POST", "/frame/parent", {})


def diff_flame(d, site, failures):
    pages = sorted(site.glob("*/*/versus/*.html"))
    if not pages:
        failures.append("diff flame: no idiom-against-plain page (report/<scale>/<dataset>/versus/)")
        return
    page = pages[0]
    d.go(page.as_uri())
    # The widest frame that changed: its title must hold both sides exactly.
    found = d.js("""
        let best = null, bw = 0;
        for (const r of document.querySelectorAll('rect.delta')) {
          const w = parseFloat(r.getAttribute('width'));
          const f = r.getAttribute('fill');
          if (f !== '#dddddd' && w > bw) { best = r; bw = w; }
        }
        if (!best) return null;
        best.scrollIntoView({block: 'center'});
        return [best, best.querySelector('title').textContent];""")
    if found is None:
        failures.append(f"diff flame: {page.relative_to(site)}: no frame coloured as changed")
        return
    rect, title = found
    d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                                          "actions": [{"type": "pointerMove", "origin": rect,
                                                       "x": 0, "y": 0, "duration": 0}]}]})
    tip = d.js("const t = document.getElementById('tip'); return t ? [t.style.display, t.textContent] : null;")
    lines = title.split("\n")
    ok = (len(lines) == 3 and lines[1].startswith("bytes: ") and lines[2].startswith("blocks: ")
          and all("\u2192" in l and any(ch.isdigit() for ch in l) for l in lines[1:]))
    if not ok:
        failures.append(f"diff flame: {page.relative_to(site)}: a frame's title is {title!r}, not before -> after")
    elif tip is None or tip[0] != "block" or tip[1] != title:
        failures.append(f"diff flame: {page.relative_to(site)}: the tip shows {tip!r}, the frame's title is {title!r}")
    d.s("POST", "/actions", {"actions": [{"type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
                                          "actions": [{"type": "pointerMove", "x": 1, "y": 1, "duration": 0}]}]})
    d.s("DELETE", "/actions")


def without_javascript(d, site, failures):
    page = open_first_page_with(d, site, 'class="point"', failures, "without JavaScript")
    if page is None:
        return
    for css, what in [("table.sortable tbody tr", "table rows"), ("figure svg circle.point title", "figure points"),
                      ("nav a[href]", "navigation"), ("h1", "a title")]:
        if not d.find(css):
            failures.append(f"without JavaScript: {page.relative_to(site)} shows no {what}")
    if d.find("#tip"):
        failures.append("without JavaScript: the hover tip exists, so the script ran")


if __name__ == "__main__":
    main()
